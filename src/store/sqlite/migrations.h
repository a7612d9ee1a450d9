// Versioned schema migrations of the SQLite store (docs/formats/sqlite-schema.md).
//
// Thread-safety: ApplyMigrations needs exclusive use of `db`; it serializes
// with other processes through a BEGIN IMMEDIATE transaction.
#pragma once

#include "store/sqlite/db.h"

#include "absl/status/status.h"

#include <cstdint>

namespace runloom::store_internal {

// PRAGMA application_id of a runloom database ("RLOM").
inline constexpr int64_t kApplicationId = 0x524C4F4D;
// The newest schema version this binary knows (PRAGMA user_version).
int64_t LatestSchemaVersion();

// Reads, never writes: kFailedPrecondition when `db` is not a runloom
// database this binary can use (not SQLite, another application's id, an
// unmarked database that already has tables, a newer schema); kDataLoss for
// a negative schema version. A new, empty database passes.
absl::Status CheckDatabaseIsOurs(Db& db);

// Brings the database to LatestSchemaVersion() in one transaction.
// kFailedPrecondition: the file belongs to another application, or its
// schema is newer than this binary (nothing is written then).
absl::Status ApplyMigrations(Db& db);

}  // namespace runloom::store_internal
