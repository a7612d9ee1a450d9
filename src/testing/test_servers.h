// The PostgreSQL and Redis servers the tests run against.
//
// Under ctest, the `servers` fixture (tests/CMakeLists.txt) starts one of
// each before the first test that needs them and passes their directory in
// RUNLOOM_TEST_SERVERS; a test binary run by hand starts its own on first
// use (scripts/test-servers.sh, in a temporary directory) and stops them at
// exit. Either way they listen on 127.0.0.1 only.
//
// Example:
//   absl::StatusOr<std::string> url = CreateTestPostgresDatabase("my_test");
//   ASSERT_OK(url);  // postgres://runloom@127.0.0.1:PORT/rl_my_test_...
#pragma once

#include "absl/status/statusor.h"

#include <string>

namespace runloom::testing {

struct TestServers {
  std::string postgres_url;  // postgres://runloom@127.0.0.1:PORT/postgres
  std::string redis_url;     // redis://127.0.0.1:PORT
  std::string dir;           // their data (and the *.url files)
};

// The servers of this test process (see above). kUnavailable when they
// cannot be found or started (the message says why).
absl::StatusOr<TestServers> GetTestServers();

// A new, empty database on the test PostgreSQL, named after `hint` (made
// unique and safe), and its URL. Each test that writes gets its own, so
// tests share no rows and no LISTEN/NOTIFY channels.
absl::StatusOr<std::string> CreateTestPostgresDatabase(const std::string& hint);

// The source tree's root: $RUNLOOM_SOURCE_DIR, else the one this build was
// configured from. For tests that read the scripts and docs in it.
std::string SourceDir();

// Runs `bash scripts/test-servers.sh cmd dir` (argv, no shell string) and
// waits: start, stop, restart-postgres or restart-redis (see the script).
// Its exit code; -1 when it could not run. For a test that starts a pair of
// its own because it restarts them (the fixture's pair is shared).
int RunTestServersScript(const std::string& cmd, const std::string& dir);

// The port of a server URL "scheme://user@127.0.0.1:PORT/path" (0 when it
// has none), and the same URL with another port: to put a TcpProxy between
// a client and the test PostgreSQL.
int UrlPort(const std::string& url);
std::string UrlWithPort(const std::string& url, int port);

}  // namespace runloom::testing
