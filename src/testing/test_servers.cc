#include "testing/test_servers.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <libpq-fe.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#ifndef RUNLOOM_SOURCE_DIR_DEFAULT
#define RUNLOOM_SOURCE_DIR_DEFAULT "."
#endif

namespace runloom::testing {
namespace {

absl::StatusOr<std::string> ReadUrl(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string url;
  if (!in || !std::getline(in, url) || url.empty()) {
    return absl::UnavailableError(absl::StrCat("no test server URL in ", file.string()));
  }
  return url;
}

// Servers this process started itself (no ctest fixture), stopped at exit.
std::string* own_dir = nullptr;

void StopOwnServers() {
  if (own_dir != nullptr) RunTestServersScript("stop", *own_dir);
}

absl::StatusOr<TestServers> FindOrStart() {
  std::string dir;
  if (const char* env = std::getenv("RUNLOOM_TEST_SERVERS"); env != nullptr && *env != '\0') {
    dir = env;
  } else {
    dir = (std::filesystem::temp_directory_path() / absl::StrCat("runloom-servers-", getpid()))
              .string();
    if (RunTestServersScript("start", dir) != 0) {
      return absl::UnavailableError(
          absl::StrCat("could not start the test servers (scripts/test-servers.sh start ", dir,
                       "); install them with `bash scripts/bootstrap.sh --test`"));
    }
    own_dir = new std::string(dir);
    std::atexit(StopOwnServers);
  }
  TestServers s;
  s.dir = dir;
  auto pg = ReadUrl(std::filesystem::path(dir) / "postgres.url");
  if (!pg.ok()) return pg.status();
  auto redis = ReadUrl(std::filesystem::path(dir) / "redis.url");
  if (!redis.ok()) return redis.status();
  s.postgres_url = *pg;
  s.redis_url = *redis;
  return s;
}

}  // namespace

std::string SourceDir() {
  const char* src = std::getenv("RUNLOOM_SOURCE_DIR");
  return src != nullptr ? src : RUNLOOM_SOURCE_DIR_DEFAULT;
}

int RunTestServersScript(const std::string& cmd, const std::string& dir) {
  const std::string script = absl::StrCat(SourceDir(), "/scripts/test-servers.sh");
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execlp("bash", "bash", script.c_str(), cmd.c_str(), dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

absl::StatusOr<TestServers> GetTestServers() {
  // Found or started once, on first use (a function-local static's
  // initialization is thread-safe).
  static const absl::StatusOr<TestServers>* servers =
      new absl::StatusOr<TestServers>(FindOrStart());
  return *servers;
}

absl::StatusOr<std::string> CreateTestPostgresDatabase(const std::string& hint) {
  absl::StatusOr<TestServers> servers = GetTestServers();
  if (!servers.ok()) return servers.status();
  static std::atomic<int> counter{0};
  std::string name = absl::StrCat("rl_", getpid(), "_", counter++, "_");
  for (char c : hint) {
    if (name.size() >= 60) break;  // PostgreSQL names are at most 63 bytes
    name += (std::isalnum(static_cast<unsigned char>(c)) != 0) ? static_cast<char>(std::tolower(c))
                                                               : '_';
  }
  PGconn* conn = PQconnectdb(servers->postgres_url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string why = PQerrorMessage(conn);
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat("test PostgreSQL: ", why));
  }
  // `name` is [a-z0-9_] only, so quoting it is enough.
  PGresult* r = PQexec(conn, absl::StrCat("CREATE DATABASE \"", name, "\"").c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  std::string why = ok ? "" : PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(conn);
  if (!ok) return absl::UnavailableError(absl::StrCat("CREATE DATABASE ", name, ": ", why));
  absl::string_view base = servers->postgres_url;
  if (!absl::ConsumeSuffix(&base, "/postgres")) {
    return absl::InternalError(absl::StrCat("unexpected test URL ", servers->postgres_url));
  }
  return absl::StrCat(base, "/", name);
}

int UrlPort(const std::string& url) {
  const size_t colon = url.rfind(':');
  if (colon == std::string::npos) return 0;
  const size_t slash = url.find('/', colon);
  int port = 0;
  return absl::SimpleAtoi(url.substr(colon + 1, slash == std::string::npos ? std::string::npos
                                                                           : slash - colon - 1),
                          &port)
             ? port
             : 0;
}

std::string UrlWithPort(const std::string& url, int port) {
  const size_t colon = url.rfind(':');
  if (colon == std::string::npos) return url;
  const size_t slash = url.find('/', colon);
  return absl::StrCat(url.substr(0, colon + 1), port,
                      slash == std::string::npos ? "" : url.substr(slash));
}

}  // namespace runloom::testing
