// Row <-> record conversion for the SQLite store (docs/formats/sqlite-schema.md):
// the shared readers of store/record_codec.h over an SQLite Statement.
//
// Thread-safety: stateless functions.
#pragma once

#include "store/record_codec.h"
#include "store/sqlite/db.h"

#define RUNLOOM_SQLITE_RUN_COLUMNS RUNLOOM_RUN_COLUMNS
#define RUNLOOM_SQLITE_STEP_COLUMNS RUNLOOM_STEP_COLUMNS
#define RUNLOOM_SQLITE_EVENT_COLUMNS RUNLOOM_EVENT_COLUMNS
