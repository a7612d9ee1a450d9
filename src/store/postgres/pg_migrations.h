// The PostgreSQL schema of runloom (schema `runloom`) and its migrations.
//
// MigratePostgres runs in one transaction under an advisory lock, so
// concurrent openers migrate once; a database whose runloom schema is newer
// than this binary is refused (kFailedPrecondition) with nothing written.
//
// Thread-safety: call with a connection no other thread uses.
#pragma once

#include "store/postgres/pg_conn.h"

#include "absl/status/status.h"

#include <cstdint>
#include <string>

namespace runloom::store_internal {

int64_t LatestPostgresSchemaVersion();

// `where` names the database in messages.
absl::Status MigratePostgres(PgConn& conn, const std::string& where);

}  // namespace runloom::store_internal
