#include "store/sqlite/wal_gather_vfs.h"

#include <cstdint>
#include <cstring>
#include <mutex>
#include <sqlite3.h>

namespace runloom::store_internal {
namespace {

constexpr char kName[] = "runloom-wal-gather";
// Past this many bytes the buffer is written out even mid-commit.
constexpr int kMaxBuffer = 512 << 10;
// A WAL frame's header; bytes 4-7 (big-endian) are the database's size in
// pages after a commit frame, 0 in any other frame.
constexpr int kFrameHeader = 24;

sqlite3_vfs* base_vfs = nullptr;  // set once, by Register()
sqlite3_vfs gather_vfs;

struct DbFile;

// The file SQLite sees for a WAL. `real` is the base VFS's file, placed in
// the same allocation just past this struct.
struct GatherFile {
  sqlite3_file base;
  sqlite3_file* real;
  DbFile* db;           // its database file's, when that is ours; else null
  sqlite3_int64 start;  // the file offset of buf[0]
  char* buf;            // sqlite3_malloc'd; len bytes pending
  int len;
  int cap;
  bool commit_page_next;  // the last write was a commit frame's header
};

// The file SQLite sees for a main database: the base's, but for the WAL
// write lock's release (below), which happens on this file (the unix VFS
// keeps the WAL index and its locks with the database file).
struct DbFile {
  sqlite3_file base;
  sqlite3_file* real;
  GatherFile* wal;  // its connection's WAL file while open, else null
};

// Where the base's file starts in an allocation of ours, past either wrapper.
constexpr int RealOffset() {
  constexpr size_t larger = sizeof(GatherFile) > sizeof(DbFile) ? sizeof(GatherFile) : sizeof(DbFile);
  return static_cast<int>((larger + 7) & ~static_cast<size_t>(7));
}

GatherFile* Of(sqlite3_file* f) { return reinterpret_cast<GatherFile*>(f); }
DbFile* DbOf(sqlite3_file* f) { return reinterpret_cast<DbFile*>(f); }
sqlite3_file* Real(sqlite3_file* f) { return Of(f)->real; }

// The unix VFS writes at most 128 KiB - 1 bytes a call (its seekAndWrite
// masks the count with 0x1ffff), so the buffer goes out in pieces of this.
constexpr int kMaxWrite = 120 << 10;

int Flush(GatherFile* g) {
  int rc = SQLITE_OK;
  for (int done = 0; done < g->len && rc == SQLITE_OK; done += kMaxWrite) {
    const int n = g->len - done < kMaxWrite ? g->len - done : kMaxWrite;
    rc = g->real->pMethods->xWrite(g->real, g->buf + done, n, g->start + done);
  }
  g->len = 0;
  return rc;
}

int Write(sqlite3_file* f, const void* data, int amt, sqlite3_int64 at) {
  GatherFile* g = Of(f);
  if (g->len > 0 && (at != g->start + g->len || g->len + amt > kMaxBuffer)) {
    const int rc = Flush(g);
    if (rc != SQLITE_OK) return rc;
  }
  if (amt > kMaxWrite) return g->real->pMethods->xWrite(g->real, data, amt, at);
  if (g->len + amt > g->cap) {
    const int cap = g->len + amt > 64 << 10 ? kMaxBuffer : 64 << 10;
    void* grown = sqlite3_realloc(g->buf, cap);
    if (grown == nullptr) {
      const int rc = Flush(g);
      if (rc != SQLITE_OK) return rc;
      return g->real->pMethods->xWrite(g->real, data, amt, at);
    }
    g->buf = static_cast<char*>(grown);
    g->cap = cap;
  }
  if (g->len == 0) g->start = at;
  std::memcpy(g->buf + g->len, data, static_cast<size_t>(amt));
  g->len += amt;
  if (g->commit_page_next) {
    // The commit frame's page: the commit is whole, write it now.
    g->commit_page_next = false;
    return Flush(g);
  }
  if (amt == kFrameHeader) {
    const auto* h = static_cast<const unsigned char*>(data);
    g->commit_page_next = (h[4] | h[5] | h[6] | h[7]) != 0;
  }
  return SQLITE_OK;
}

int Close(sqlite3_file* f) {
  GatherFile* g = Of(f);
  if (g->db != nullptr) g->db->wal = nullptr;
  const int flushed = Flush(g);
  const int closed = g->real->pMethods->xClose(g->real);
  sqlite3_free(g->buf);
  g->buf = nullptr;
  return flushed != SQLITE_OK ? flushed : closed;
}

// Every other method writes the buffer out first, then calls the base's.
#define RUNLOOM_FLUSH_OR_RETURN(f)             \
  do {                                         \
    const int flush_rc = Flush(Of(f));         \
    if (flush_rc != SQLITE_OK) return flush_rc; \
  } while (false)

int Read(sqlite3_file* f, void* out, int amt, sqlite3_int64 at) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xRead(Real(f), out, amt, at);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int Sync(sqlite3_file* f, int flags) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xSync(Real(f), flags);
}
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int Lock(sqlite3_file* f, int level) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xLock(Real(f), level);
}
int Unlock(sqlite3_file* f, int level) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xUnlock(Real(f), level);
}
int CheckReservedLock(sqlite3_file* f, int* out) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int ShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xShmMap(Real(f), region, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
// The unix VFS keeps the WAL index on the database file, so SQLite calls
// these on a WAL file never; they are here because version 3 has them.
void ShmBarrier(sqlite3_file* f) {
  (void)Flush(Of(f));  // empty: a method called before would have flushed
  Real(f)->pMethods->xShmBarrier(Real(f));
}
int ShmUnmap(sqlite3_file* f, int delete_flag) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xShmUnmap(Real(f), delete_flag);
}
int Fetch(sqlite3_file* f, sqlite3_int64 at, int amt, void** out) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xFetch(Real(f), at, amt, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 at, void* p) {
  RUNLOOM_FLUSH_OR_RETURN(f);
  return Real(f)->pMethods->xUnfetch(Real(f), at, p);
}
#undef RUNLOOM_FLUSH_OR_RETURN

constexpr sqlite3_io_methods kMethods = {
    3,          Close,       Read,     Write,        Truncate, Sync,
    FileSize,   Lock,        Unlock,   CheckReservedLock,      FileControl,
    SectorSize, DeviceCharacteristics, ShmMap,     ShmLock,  ShmBarrier,
    ShmUnmap,   Fetch,       Unfetch,
};

// ---- the main database file: the base's methods, one hook ----

sqlite3_file* DbReal(sqlite3_file* f) { return DbOf(f)->real; }

int DbClose(sqlite3_file* f) {
  DbFile* d = DbOf(f);
  if (d->wal != nullptr) d->wal->db = nullptr;
  return d->real->pMethods->xClose(d->real);
}
int DbRead(sqlite3_file* f, void* out, int amt, sqlite3_int64 at) {
  return DbReal(f)->pMethods->xRead(DbReal(f), out, amt, at);
}
int DbWrite(sqlite3_file* f, const void* data, int amt, sqlite3_int64 at) {
  return DbReal(f)->pMethods->xWrite(DbReal(f), data, amt, at);
}
int DbTruncate(sqlite3_file* f, sqlite3_int64 size) {
  return DbReal(f)->pMethods->xTruncate(DbReal(f), size);
}
int DbSync(sqlite3_file* f, int flags) { return DbReal(f)->pMethods->xSync(DbReal(f), flags); }
int DbFileSize(sqlite3_file* f, sqlite3_int64* size) {
  return DbReal(f)->pMethods->xFileSize(DbReal(f), size);
}
int DbLock(sqlite3_file* f, int level) { return DbReal(f)->pMethods->xLock(DbReal(f), level); }
int DbUnlock(sqlite3_file* f, int level) { return DbReal(f)->pMethods->xUnlock(DbReal(f), level); }
int DbCheckReservedLock(sqlite3_file* f, int* out) {
  return DbReal(f)->pMethods->xCheckReservedLock(DbReal(f), out);
}
int DbFileControl(sqlite3_file* f, int op, void* arg) {
  return DbReal(f)->pMethods->xFileControl(DbReal(f), op, arg);
}
int DbSectorSize(sqlite3_file* f) { return DbReal(f)->pMethods->xSectorSize(DbReal(f)); }
int DbDeviceCharacteristics(sqlite3_file* f) {
  return DbReal(f)->pMethods->xDeviceCharacteristics(DbReal(f));
}
int DbShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return DbReal(f)->pMethods->xShmMap(DbReal(f), region, size, extend, out);
}
// Index 0 of the WAL index's locks is the write lock (SQLite's WAL_WRITE_LOCK).
constexpr int kWalWriteLock = 0;
int DbShmLock(sqlite3_file* f, int offset, int n, int flags) {
  DbFile* d = DbOf(f);
  if (offset == kWalWriteLock && n == 1 &&
      flags == (SQLITE_SHM_UNLOCK | SQLITE_SHM_EXCLUSIVE) && d->wal != nullptr) {
    // The write transaction is over. A commit emptied the buffer at its
    // last frame; what a rolled-back transaction spilled is left, frames
    // past the WAL's end that nobody reads. Written now, while the lock is
    // held, as without the shim: written later, it could overwrite frames
    // another connection appends once the lock is free.
    (void)Flush(d->wal);
  }
  return d->real->pMethods->xShmLock(d->real, offset, n, flags);
}
void DbShmBarrier(sqlite3_file* f) { DbReal(f)->pMethods->xShmBarrier(DbReal(f)); }
int DbShmUnmap(sqlite3_file* f, int delete_flag) {
  return DbReal(f)->pMethods->xShmUnmap(DbReal(f), delete_flag);
}
int DbFetch(sqlite3_file* f, sqlite3_int64 at, int amt, void** out) {
  return DbReal(f)->pMethods->xFetch(DbReal(f), at, amt, out);
}
int DbUnfetch(sqlite3_file* f, sqlite3_int64 at, void* p) {
  return DbReal(f)->pMethods->xUnfetch(DbReal(f), at, p);
}

constexpr sqlite3_io_methods kDbMethods = {
    3,           DbClose,   DbRead,  DbWrite,  DbTruncate, DbSync, DbFileSize, DbLock, DbUnlock,
    DbCheckReservedLock,    DbFileControl,     DbSectorSize,       DbDeviceCharacteristics,
    DbShmMap,    DbShmLock, DbShmBarrier,      DbShmUnmap,         DbFetch, DbUnfetch,
};

// Opens the base's file for `f` past a wrapper of `wrapper_size` bytes;
// the wrapper's methods stay unset when it fails.
int OpenReal(sqlite3_filename name, sqlite3_file* f, sqlite3_file** real, int flags,
             int* out_flags) {
  *real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(f) + RealOffset());
  f->pMethods = nullptr;
  const int rc = base_vfs->xOpen(base_vfs, name, *real, flags, out_flags);
  if (rc != SQLITE_OK) return rc;
  if ((*real)->pMethods == nullptr) return SQLITE_CANTOPEN;
  if ((*real)->pMethods->iVersion < 3) {
    (*real)->pMethods->xClose(*real);
    return SQLITE_CANTOPEN;  // not reached: the unix VFS's files are version 3
  }
  return SQLITE_OK;
}

int Open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  if ((flags & SQLITE_OPEN_MAIN_DB) != 0) {
    DbFile* d = DbOf(f);
    std::memset(d, 0, sizeof(DbFile));
    const int rc = OpenReal(name, f, &d->real, flags, out_flags);
    if (rc == SQLITE_OK) d->base.pMethods = &kDbMethods;
    return rc;
  }
  if ((flags & SQLITE_OPEN_WAL) == 0) {
    // A journal or a temporary file: the base VFS's file, in the whole allocation.
    return base_vfs->xOpen(base_vfs, name, f, flags, out_flags);
  }
  GatherFile* g = Of(f);
  std::memset(g, 0, sizeof(GatherFile));
  const int rc = OpenReal(name, f, &g->real, flags, out_flags);
  if (rc != SQLITE_OK) return rc;
  // The database file this WAL belongs to: ours, so that the write lock's
  // release empties the buffer. Were it not (it always is: SQLite opens a
  // WAL with its database's VFS), the file is the base's own.
  sqlite3_file* db = sqlite3_database_file_object(name);
  if (db == nullptr || db->pMethods != &kDbMethods) {
    const int closed = g->real->pMethods->xClose(g->real);
    if (closed != SQLITE_OK) return closed;
    return base_vfs->xOpen(base_vfs, name, f, flags, out_flags);
  }
  g->db = DbOf(db);
  g->db->wal = g;
  g->base.pMethods = &kMethods;
  return SQLITE_OK;
}

bool Register() {
  sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
  // The unix VFS's files have version 3 methods (shared memory, mmap).
  if (base == nullptr || base->iVersion < 1 || std::strcmp(base->zName, "unix") != 0) return false;
  base_vfs = base;
  gather_vfs = *base;  // the base's other methods take either VFS
  gather_vfs.zName = kName;
  gather_vfs.pNext = nullptr;
  gather_vfs.szOsFile = RealOffset() + base->szOsFile;  // a wrapper, then the base's file
  gather_vfs.xOpen = Open;
  return sqlite3_vfs_register(&gather_vfs, /*makeDflt=*/0) == SQLITE_OK;
}

}  // namespace

const char* WalGatherVfsName() {
  static std::once_flag once;
  static bool registered = false;
  std::call_once(once, [] { registered = Register(); });
  return registered ? kName : nullptr;
}

}  // namespace runloom::store_internal
