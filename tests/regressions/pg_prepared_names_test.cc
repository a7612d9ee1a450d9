// Regression: the names of prepared statements moved while a pipeline
// still pointed at them (PgConn, src/store/postgres/pg_conn.h).
//
// What went wrong: PgConn kept "sql -> statement name" in a flat hash map.
// A pipeline (deferred statements, then one Exec) keeps a pointer to each
// statement's name until it is sent; preparing a statement the connection
// had not seen yet inserted into the map, a rehash moved every name, and
// the pipeline then sent freed memory as a statement name (ASan caught it
// under `runloom run` against PostgreSQL). The map is now a node map, whose
// entries do not move. This test defers more new statements in one
// pipeline than the map holds before it grows, so each growth happens with
// names in flight; under ASan the old code fails here, and in any build
// every statement must have run once.
#include "store/postgres/pg_conn.h"
#include "testing/status_matchers.h"
#include "testing/test_servers.h"

#include "gtest/gtest.h"

#include <memory>
#include <string>

namespace runloom::regressions {
namespace {

using store_internal::PgConn;
using store_internal::PgParams;
using store_internal::PgResult;

// 64 statements the connection has never prepared, each a literal of its
// own (PgConn names a statement by its text's address).
constexpr const char* kInserts[] = {
    "INSERT INTO prepared_names VALUES (1)",  "INSERT INTO prepared_names VALUES (2)",
    "INSERT INTO prepared_names VALUES (3)",  "INSERT INTO prepared_names VALUES (4)",
    "INSERT INTO prepared_names VALUES (5)",  "INSERT INTO prepared_names VALUES (6)",
    "INSERT INTO prepared_names VALUES (7)",  "INSERT INTO prepared_names VALUES (8)",
    "INSERT INTO prepared_names VALUES (9)",  "INSERT INTO prepared_names VALUES (10)",
    "INSERT INTO prepared_names VALUES (11)", "INSERT INTO prepared_names VALUES (12)",
    "INSERT INTO prepared_names VALUES (13)", "INSERT INTO prepared_names VALUES (14)",
    "INSERT INTO prepared_names VALUES (15)", "INSERT INTO prepared_names VALUES (16)",
    "INSERT INTO prepared_names VALUES (17)", "INSERT INTO prepared_names VALUES (18)",
    "INSERT INTO prepared_names VALUES (19)", "INSERT INTO prepared_names VALUES (20)",
    "INSERT INTO prepared_names VALUES (21)", "INSERT INTO prepared_names VALUES (22)",
    "INSERT INTO prepared_names VALUES (23)", "INSERT INTO prepared_names VALUES (24)",
    "INSERT INTO prepared_names VALUES (25)", "INSERT INTO prepared_names VALUES (26)",
    "INSERT INTO prepared_names VALUES (27)", "INSERT INTO prepared_names VALUES (28)",
    "INSERT INTO prepared_names VALUES (29)", "INSERT INTO prepared_names VALUES (30)",
    "INSERT INTO prepared_names VALUES (31)", "INSERT INTO prepared_names VALUES (32)",
    "INSERT INTO prepared_names VALUES (33)", "INSERT INTO prepared_names VALUES (34)",
    "INSERT INTO prepared_names VALUES (35)", "INSERT INTO prepared_names VALUES (36)",
    "INSERT INTO prepared_names VALUES (37)", "INSERT INTO prepared_names VALUES (38)",
    "INSERT INTO prepared_names VALUES (39)", "INSERT INTO prepared_names VALUES (40)",
    "INSERT INTO prepared_names VALUES (41)", "INSERT INTO prepared_names VALUES (42)",
    "INSERT INTO prepared_names VALUES (43)", "INSERT INTO prepared_names VALUES (44)",
    "INSERT INTO prepared_names VALUES (45)", "INSERT INTO prepared_names VALUES (46)",
    "INSERT INTO prepared_names VALUES (47)", "INSERT INTO prepared_names VALUES (48)",
    "INSERT INTO prepared_names VALUES (49)", "INSERT INTO prepared_names VALUES (50)",
    "INSERT INTO prepared_names VALUES (51)", "INSERT INTO prepared_names VALUES (52)",
    "INSERT INTO prepared_names VALUES (53)", "INSERT INTO prepared_names VALUES (54)",
    "INSERT INTO prepared_names VALUES (55)", "INSERT INTO prepared_names VALUES (56)",
    "INSERT INTO prepared_names VALUES (57)", "INSERT INTO prepared_names VALUES (58)",
    "INSERT INTO prepared_names VALUES (59)", "INSERT INTO prepared_names VALUES (60)",
    "INSERT INTO prepared_names VALUES (61)", "INSERT INTO prepared_names VALUES (62)",
    "INSERT INTO prepared_names VALUES (63)", "INSERT INTO prepared_names VALUES (64)",
};
constexpr char kCount[] = "SELECT count(*), sum(n) FROM prepared_names";

TEST(PgPreparedNames, NamesSurviveTheMapGrowingInsideOnePipeline) {
  absl::StatusOr<std::string> url =
      testing::CreateTestPostgresDatabase("regression_prepared_names");
  ASSERT_OK(url);
  absl::StatusOr<std::unique_ptr<PgConn>> conn = PgConn::Connect(*url, "");
  ASSERT_OK(conn);
  PgConn& c = **conn;
  ASSERT_OK(c.ExecScript("CREATE TEMP TABLE prepared_names (n INTEGER NOT NULL)"));
  for (const char* sql : kInserts) c.Defer(sql, PgParams());
  absl::StatusOr<PgResult> r = c.Exec(kCount);  // the pipeline: 64 prepares, then this
  ASSERT_OK(r);
  ASSERT_EQ(r->rows(), 1);
  EXPECT_EQ(r->row(0).ColumnInt(0), 64);
  EXPECT_EQ(r->row(0).ColumnInt(1), 64 * 65 / 2);  // each one once
}

}  // namespace
}  // namespace runloom::regressions
