// An SQLite VFS shim over the default ("unix") VFS that gathers the writes
// of each commit to a WAL file into one pwrite.
//
// SQLite writes every WAL frame as two writes (its 24-byte header, then the
// page), so a commit of 25 pages is 50 pwrite calls; on this project's
// machines a system call costs several microseconds (measured: pwrite was
// 12 % of the process's CPU at saturation). The shim keeps the contiguous
// writes of a WAL file in a buffer and writes them in one call (one per
// 120 KiB: the unix VFS writes no more at a time) when SQLite
// writes a commit frame's page (the frame header's "database size" field is
// not zero only for a commit frame), before any other call on the file
// (read, sync, truncate, size, locks, shared memory, file control, close),
// when a write is not contiguous with the buffer, and past 512 KiB. So a
// commit's frames are in the file before xWrite returns for its last page,
// which is before SQLite publishes the commit in the WAL index (shared
// memory, on the database file): no reader of any process can see a frame
// that is not in the file, and a write error is the commit's own error, as
// without the shim. Durability is unchanged:
// nothing is synced more or less than SQLite asks (xSync writes the buffer
// first). Other files (the database, its -shm, journals) are the base VFS's
// own, untouched.
//
// Written by hand: SQLite has no option to gather WAL writes, and no shim of
// this kind ships in a Debian package.
//
// Thread-safety: the VFS is registered once (thread-safe). Each open file is
// used as SQLite uses any file: by its connection's thread.
#pragma once

namespace runloom::store_internal {

// The shim's VFS name (registered on first call, not as the default), to
// pass to sqlite3_open_v2; nullptr (the default VFS) when the default VFS
// is not one the shim can wrap.
const char* WalGatherVfsName();

}  // namespace runloom::store_internal
