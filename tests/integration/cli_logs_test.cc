// Issue 25, "Logs": the `runloom` binary's log lines on stderr. With
// --log-format json (or RUNLOOM_LOG_FORMAT=json) every line is one JSON
// object with a UTC `ts`, a `level` and a `msg`, and the run, step, attempt
// and worker where they apply; a secret never appears. A format that is not
// text or json exits 2 before anything is written.
#include "runloom/clock.h"

#include "absl/time/time.h"
#include "cli_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

namespace runloom::testing {
namespace {

using ::testing::HasSubstr;

// What a run of the binary printed, stdout and stderr apart.
struct SplitResult {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs `runloom args...` with `env` ("NAME=value ..." for the shell) and
// the test's environment.
SplitResult RunSplit(const std::vector<std::string>& args, const std::string& env = "") {
  const std::string dir = MakeTempDir("logs-out");
  std::string cmd = env + " '" + Binary() + "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  cmd += " 2>" + dir + "/err.txt >" + dir + "/out.txt </dev/null";
  SplitResult r;
  const int st = std::system(cmd.c_str());
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = ReadFile(dir + "/out.txt");
  r.err = ReadFile(dir + "/err.txt");
  return r;
}

// Every line of `err`, each parsed as one JSON object with a UTC
// millisecond `ts` within a minute of now, a known `level` and a `msg`
// (test failures name the line otherwise).
std::vector<nlohmann::json> ParseJsonLogLines(const std::string& err) {
  static const std::regex kTs(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$)");
  const std::set<std::string> levels = {"debug", "info", "warning", "error"};
  const absl::Time now = RealClock()->Now();
  std::vector<nlohmann::json> out;
  std::stringstream ss(err);
  std::string line;
  while (std::getline(ss, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.is_object()) << "not a JSON object: " << line;
    if (!j.is_object()) continue;
    const std::string ts = j.value("ts", "");
    EXPECT_TRUE(std::regex_match(ts, kTs)) << line;
    absl::Time at;
    std::string why;
    EXPECT_TRUE(absl::ParseTime("%Y-%m-%dT%H:%M:%E3SZ", ts, absl::UTCTimeZone(), &at, &why))
        << why << ": " << line;
    EXPECT_LT(absl::AbsDuration(now - at), absl::Minutes(1)) << line;
    EXPECT_TRUE(levels.contains(j.value("level", ""))) << line;
    EXPECT_TRUE(j.contains("msg") && j["msg"].is_string()) << line;
    out.push_back(std::move(j));
  }
  return out;
}

// The lines about `run_id`.
std::vector<nlohmann::json> LinesOf(const std::vector<nlohmann::json>& lines,
                                    const std::string& run_id) {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& j : lines) {
    if (j.value("run_id", "") == run_id) out.push_back(j);
  }
  return out;
}

// Acceptance: the ingest example (offline, a parser failure retried), then a
// run whose step prints its secret input to stderr and fails, given as a
// reference and as a value; stderr parsed line by line.
TEST(CliLogs, JsonLinesParseOneByOneWithUtcTimesTheRunIdAndNoSecret) {
  const std::string dir = MakeTempDir("logs-json");
  const std::string secret = "l0g-s3cr3t-" + std::to_string(getpid());
  setenv("RUNLOOM_SECRET_LOG_KEY", secret.c_str(), 1);
  std::string everything;

  SplitResult ingest =
      RunSplit({"run", SourceDir() + "/examples/ingest.yaml", "--db", dir + "/ingest.db", "--input",
                "document_id=doc-7", "--input", "format=html", "--input", "fail_parse_times=1",
                "--log-format", "json"},
               "RUNLOOM_LOG_LEVEL=debug");
  EXPECT_EQ(ingest.code, 0) << ingest.out << ingest.err;
  const std::string ingest_id = RunIdFrom(ingest.out);
  ASSERT_FALSE(ingest_id.empty()) << ingest.out;
  const std::vector<nlohmann::json> ingest_lines = ParseJsonLogLines(ingest.err);
  const std::vector<nlohmann::json> about_ingest = LinesOf(ingest_lines, ingest_id);
  ASSERT_FALSE(about_ingest.empty()) << ingest.err;
  bool retried_step = false;
  for (const nlohmann::json& j : about_ingest) {
    EXPECT_TRUE(j.contains("worker")) << j.dump();
    retried_step = retried_step || (j.value("step", "") == "parse_html" && j["attempt"] == 1);
  }
  EXPECT_TRUE(retried_step) << "no line about parse_html's failed attempt 1:\n" << ingest.err;
  for (const nlohmann::json& j : ingest_lines) {
    if (!j.contains("run_id")) {
      EXPECT_FALSE(j.contains("step") || j.contains("attempt")) << j.dump();
    }
  }
  everything += ingest.out + ingest.err;

  WriteFile(dir + "/leak.yaml",
            "name: leak\ninputs:\n  key: {type: string, secret: true}\nsteps:\n"
            "  - id: s\n    kind: exec\n    retry: {max_attempts: 2, initial_delay: 10ms, on: "
            "[error]}\n"
            "    command: [sh, -c, 'echo key-is-$0 >&2; echo \"{\\\"k\\\": \\\"$0\\\"}\"; exit 3', "
            "'{{ inputs.key }}']\n");
  for (const std::string& given : {std::string("secret://LOG_KEY"), secret}) {
    SplitResult leak = RunSplit(
        {"run", dir + "/leak.yaml", "--db", dir + "/leak-" + std::to_string(given.size()) + ".db",
         "--input", "key=" + given, "--log-format", "json"},
        "RUNLOOM_LOG_LEVEL=debug");
    EXPECT_EQ(leak.code, 1) << leak.out << leak.err;  // the step fails (exit 3)
    const std::string run_id = RunIdFrom(leak.out);
    ASSERT_FALSE(run_id.empty()) << leak.out;
    int failed_attempts = 0;
    for (const nlohmann::json& j : LinesOf(ParseJsonLogLines(leak.err), run_id)) {
      if (j.value("step", "") != "s") continue;
      ++failed_attempts;
      EXPECT_THAT(j.value("msg", ""), HasSubstr("key-is-[secret]")) << j.dump();
    }
    EXPECT_EQ(failed_attempts, 2) << leak.err;
    everything += leak.out + leak.err;
  }
  unsetenv("RUNLOOM_SECRET_LOG_KEY");
  EXPECT_EQ(everything.find(secret), std::string::npos) << everything;
}

// RUNLOOM_LOG_FORMAT=json does the same for a worker with no flag; the
// default text lines start with the UTC timestamp and the level.
TEST(CliLogs, TheEnvironmentSelectsJsonAndTextLinesHaveATimestampAndLevel) {
  const std::string dir = MakeTempDir("logs-env");
  const std::string db = dir + "/env.db";
  WriteFile(dir + "/one.yaml",
            "name: one\nsteps:\n  - id: a\n    kind: exec\n    command: \"echo '{}'\"\n");
  SplitResult detached = RunSplit({"run", dir + "/one.yaml", "--db", db, "--detach"});
  ASSERT_EQ(detached.code, 0) << detached.out << detached.err;
  const std::string run_id = detached.out.substr(0, detached.out.find('\n'));  // the id alone
  ASSERT_FALSE(run_id.empty()) << detached.out;
  SplitResult worker = RunSplit({"worker", "--db", db, "--until-idle"},
                                "RUNLOOM_LOG_LEVEL=debug RUNLOOM_LOG_FORMAT=json");
  EXPECT_EQ(worker.code, 0) << worker.err;
  const std::vector<nlohmann::json> lines = ParseJsonLogLines(worker.err);
  EXPECT_FALSE(LinesOf(lines, run_id).empty()) << worker.err;
  // The worker's own notices are log lines too.
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.back().value("msg", ""), HasSubstr("runloom worker: stopped; 1 runs finished"));

  SplitResult text = RunSplit({"run", dir + "/one.yaml", "--db", db}, "RUNLOOM_LOG_LEVEL=debug");
  EXPECT_EQ(text.code, 0) << text.err;
  static const std::regex kTextLine(
      R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[runloom\] \[(debug|info|warning|error)\] .+$)");
  std::stringstream ss(text.err);
  std::string line;
  int text_lines = 0;
  while (std::getline(ss, line)) {
    ++text_lines;
    EXPECT_TRUE(std::regex_match(line, kTextLine)) << line;
  }
  EXPECT_GT(text_lines, 0);
  EXPECT_THAT(text.err, HasSubstr(" run_id=" + RunIdFrom(text.out) + " attempt=1 worker="));
}

// An unknown format, from the flag or the environment: exit 2 naming where
// it came from and the accepted values, before anything is written.
TEST(CliLogs, AnUnknownFormatExitsTwoAndWritesNothing) {
  const std::string dir = MakeTempDir("logs-bad");
  const std::string db = dir + "/bad.db";
  WriteFile(dir + "/one.yaml",
            "name: one\nsteps:\n  - id: a\n    kind: exec\n    command: \"echo '{}'\"\n");
  SplitResult flag = RunSplit({"run", dir + "/one.yaml", "--db", db, "--log-format", "yaml"});
  EXPECT_EQ(flag.code, 2);
  EXPECT_THAT(flag.err, HasSubstr("--log-format: unknown log format 'yaml'; use text or json"));
  SplitResult env = RunSplit({"worker", "--db", db, "--until-idle"}, "RUNLOOM_LOG_FORMAT=JSON");
  EXPECT_EQ(env.code, 2);
  EXPECT_THAT(env.err,
              HasSubstr("RUNLOOM_LOG_FORMAT: unknown log format 'JSON'; use text or json"));
  EXPECT_FALSE(std::filesystem::exists(db));
  // The flag wins over the environment.
  SplitResult both = RunSplit({"run", dir + "/one.yaml", "--db", db, "--log-format", "text"},
                              "RUNLOOM_LOG_FORMAT=yaml");
  EXPECT_EQ(both.code, 0) << both.err;
}

}  // namespace
}  // namespace runloom::testing
