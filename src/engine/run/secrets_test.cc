// Secret references resolve from the environment or an owner-only file, and
// the scrubber removes every known value from what an execution writes.
#include "engine/run/secrets.h"

#include "core/log.h"
#include "testing/capturing_logger.h"
#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace runloom::engine_internal {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

TEST(Secrets, ResolveFromTheEnvironmentThenAnOwnerOnlyFile) {
  const std::string file =
      std::filesystem::temp_directory_path() / ("runloom-secrets-" + std::to_string(getpid()));
  std::ofstream(file) << "# comment\nFILE_KEY=from-file\nOTHER=x\n";
  chmod(file.c_str(), 0600);
  setenv("RUNLOOM_SECRETS_FILE", file.c_str(), 1);
  setenv("RUNLOOM_SECRET_ENV_KEY", "from-env", 1);
  EXPECT_THAT(ResolveSecret("ENV_KEY"), IsOkAndHolds("from-env"));
  EXPECT_THAT(ResolveSecret("FILE_KEY"), IsOkAndHolds("from-file"));
  EXPECT_THAT(ResolveSecret("MISSING"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("RUNLOOM_SECRET_MISSING")));
  chmod(file.c_str(), 0644);
  EXPECT_THAT(ResolveSecret("FILE_KEY"),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("chmod 600")));
  unsetenv("RUNLOOM_SECRETS_FILE");
  unsetenv("RUNLOOM_SECRET_ENV_KEY");
  std::filesystem::remove(file);
}

TEST(Secrets, ScrubberReplacesEveryValueInEveryWrittenText) {
  SecretScrubber s;
  s.Add("hunter2");
  s.Add("hunter2-long");
  s.Add("");
  RunWrite w;
  StepRecord r;
  r.output = {{"k", "x hunter2 y"}, {"hunter2", {"hunter2-long"}}};
  r.error = "failed: hunter2";
  r.stderr_tail = "key-is-hunter2-long\n";
  w.steps.push_back(r);
  w.events.push_back(Event{.type = "step.failed", .data = {{"error", "hunter2"}}});
  w.error = "run failed: hunter2";
  s.Scrub(w);
  EXPECT_EQ(w.steps[0].output.dump(), R"({"[secret]":["[secret]"],"k":"x [secret] y"})");
  EXPECT_EQ(w.steps[0].error, "failed: [secret]");
  EXPECT_EQ(w.steps[0].stderr_tail, "key-is-[secret]\n");
  EXPECT_EQ(w.events[0].data["error"], "[secret]");
  EXPECT_EQ(*w.error, "run failed: [secret]");
}

// A step's logger (leaf_step.cc): the run's secrets scrubbed from the
// message, the attempt's fields added, before the process's logger.
TEST(Secrets, AStepsLogLinesAreScrubbedAndCarryItsFields) {
  SecretScrubber s;
  s.Add("hunter2");
  runloom::testing::CapturingLogger captured;
  FieldsLogger fields(&captured, "r_1", "fetch", 2, "host:9");
  ScrubbingLogger logger(&fields, &s);
  Log(&logger, LogLevel::kWarning, "GET https://x/?key=hunter2 failed");
  Log(&logger, LogLevel::kInfo, {.step = "fetch/inner"}, "token hunter2");
  const auto lines = captured.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].message, "GET https://x/?key=[secret] failed");
  EXPECT_EQ(lines[0].run_id, "r_1");
  EXPECT_EQ(lines[0].step, "fetch");
  EXPECT_EQ(lines[0].attempt, 2);
  EXPECT_EQ(lines[0].worker, "host:9");
  EXPECT_EQ(lines[1].message, "token [secret]");
  EXPECT_EQ(lines[1].step, "fetch/inner");  // a line's own field wins
  EXPECT_EQ(lines[1].run_id, "r_1");
}

}  // namespace
}  // namespace runloom::engine_internal
