// The backends the conformance suites run against in this build, each named
// by the URL OpenBackend opens.
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_migrations.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "conformance_fixture.h"

#include <filesystem>

namespace runloom::conformance {
namespace {

// Runs AcquireLease's first write through Store::ApplyFirstWrite (lease,
// then commit, in two transactions: the path of a backend without a
// one-commit lease) over a real backend, so it meets the same suite.
class TwoCommitFirstWrite final : public StoreWrapper {
 public:
  using StoreWrapper::AcquireLease;
  using StoreWrapper::StoreWrapper;
  absl::StatusOr<Lease> AcquireLease(LeaseRequest request) override {
    std::optional<RunWrite> first = std::move(request.first);
    request.first.reset();
    absl::StatusOr<Lease> lease = inner().AcquireLease(std::move(request));
    if (lease.ok() && first.has_value()) ApplyFirstWrite(*first, *lease);
    return lease;
  }
};

// PostgreSQL keeps time on the server (runloom_now()). For the suite, each
// test's database gets a runloom_now() that stands still at the time it was
// created and moves only by Advance, as a SimulatedClock does for SQLite.
// (Replacing the function is a test-only change to a test database.)
class PostgresTimeControl final : public TimeControl {
 public:
  explicit PostgresTimeControl(std::string url) : url_(std::move(url)) {}
  void Configure(BackendOptions&) override {}
  void Advance(absl::Duration d) override {
    absl::StatusOr<std::unique_ptr<store_internal::PgConn>> c =
        store_internal::PgConn::Connect(url_, "");
    ASSERT_OK(c);
    ASSERT_OK((*c)->ExecScript(absl::StrCat("UPDATE runloom.clock SET offset_us = offset_us + ",
                                            absl::ToInt64Microseconds(d))));
  }

 private:
  const std::string url_;
};

// Adds the test Redis as the queue (BackendOptions::queue_url) to `inner`.
class WithRedisQueue final : public TimeControl {
 public:
  explicit WithRedisQueue(std::unique_ptr<TimeControl> inner) : inner_(std::move(inner)) {}
  void Configure(BackendOptions& options) override {
    inner_->Configure(options);
    absl::StatusOr<testing::TestServers> servers = testing::GetTestServers();
    if (!servers.ok()) {
      ADD_FAILURE() << servers.status();
      return;
    }
    options.queue_url = servers->redis_url;
  }
  void Advance(absl::Duration d) override { inner_->Advance(d); }

 private:
  const std::unique_ptr<TimeControl> inner_;
};

// A fresh database on the test server for the test at `location`, migrated,
// with its clock stopped (see PostgresTimeControl). "" on failure (the test
// then fails to open it, and the failure is recorded here).
std::string NewPostgresDatabase(const std::string& location) {
  absl::StatusOr<std::string> url =
      testing::CreateTestPostgresDatabase(std::filesystem::path(location).filename().string());
  if (!url.ok()) {
    ADD_FAILURE() << url.status();
    return "";
  }
  absl::StatusOr<std::unique_ptr<store_internal::PgConn>> c =
      store_internal::PgConn::Connect(*url, "");
  absl::Status s = c.status();
  if (s.ok()) s = store_internal::MigratePostgres(**c, *url);
  if (s.ok()) {
    s = (*c)->ExecScript(
        "UPDATE runloom.clock SET offset_us = (extract(epoch FROM now()) * 1000000)::bigint; "
        "CREATE OR REPLACE FUNCTION runloom.runloom_now() RETURNS BIGINT LANGUAGE sql STABLE AS "
        "$$ SELECT offset_us FROM runloom.clock $$");
  }
  if (!s.ok()) {
    ADD_FAILURE() << "preparing " << *url << ": " << s;
    return "";
  }
  return *url;
}

}  // namespace

std::vector<BackendUnderTest> AllBackendsUnderTest() {
  std::vector<BackendUnderTest> out;
  BackendUnderTest file;
  file.name = "SqliteFile";
  file.shared_location = true;
  file.url = [](const std::string& location) {
    return "sqlite://" + (std::filesystem::path(location) / "runloom.db").string();
  };
  out.push_back(file);

  BackendUnderTest memory;
  memory.name = "SqliteMemory";
  memory.url = [](const std::string&) { return std::string("sqlite::memory:"); };
  out.push_back(memory);

  BackendUnderTest two_commit = memory;
  two_commit.name = "SqliteMemoryTwoCommitFirstWrite";
  two_commit.wrap_store = [](std::unique_ptr<Store> s) -> std::unique_ptr<Store> {
    return std::make_unique<TwoCommitFirstWrite>(std::move(s));
  };
  out.push_back(two_commit);

  BackendUnderTest postgres;
  postgres.name = "Postgres";
  postgres.shared_location = true;
  postgres.url = NewPostgresDatabase;
  postgres.time = [](const std::string& url) -> std::unique_ptr<TimeControl> {
    return std::make_unique<PostgresTimeControl>(url);
  };
  out.push_back(postgres);

  // PostgreSQL + Redis Streams: the same database, jobs on a stream of the
  // test Redis (keys named by the database's instance id, so tests share no
  // keys). The transport's visibility deadlines follow runloom_now(), so the
  // same TimeControl moves them.
  BackendUnderTest postgres_redis = postgres;
  postgres_redis.name = "PostgresRedis";
  postgres_redis.time = [](const std::string& url) -> std::unique_ptr<TimeControl> {
    return std::make_unique<WithRedisQueue>(std::make_unique<PostgresTimeControl>(url));
  };
  out.push_back(postgres_redis);
  return out;
}

}  // namespace runloom::conformance
