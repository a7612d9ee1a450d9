// BackupSqlite: `runloom backup --to FILE` for the embedded store (issue 25):
// an online copy of a runloom SQLite file, consistent while other processes
// keep writing it (SQLite's online backup API in one step, on a read
// transaction of its own: in WAL mode a reader blocks no writer).
//
// Thread-safety: a free function; it opens connections of its own.
#pragma once

#include "absl/status/status.h"

#include <string>

namespace runloom::store_internal {

// Copies the database at `path` to the new file `to`: written as `to`.part
// beside it, then renamed, so `to` is whole or absent. kAlreadyExists
// when `to` exists (never overwritten); kInvalidArgument for an in-memory
// database or an empty `to`; kNotFound when `path` does not exist (nothing
// is created there); kUnavailable when SQLite fails (nothing is left at `to`).
absl::Status BackupSqlite(const std::string& path, const std::string& to);

}  // namespace runloom::store_internal
