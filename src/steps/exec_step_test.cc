#include "runloom/clock.h"
#include "runloom/step.h"

#include "steps/builtin_steps.h"
#include "testing/status_matchers.h"
#include "testing/step_test_util.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cerrno>
#include <dirent.h>
#include <fstream>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace runloom {
namespace {

using ::runloom::steps_testing::MakeDef;
using ::runloom::steps_testing::TestStepContext;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using json = nlohmann::json;

int CountOpenFds() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  while (readdir(dir) != nullptr) {
    ++n;
  }
  closedir(dir);
  return n;
}

class ExecStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "/steps_exec_XXXXXX";
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }

  absl::StatusOr<StepOutput> Run(TestStepContext& ctx, const json& config) {
    EXPECT_OK(exec_->Validate(MakeDef("exec", config)));
    return exec_->Execute(ctx, config);
  }
  absl::StatusOr<StepOutput> Run(const json& config) {
    TestStepContext ctx(RealClock(), dir_);
    return Run(ctx, config);
  }

  std::string dir_;
  std::shared_ptr<StepKind> exec_ = NewExecStep();
};

TEST_F(ExecStepTest, JsonRoundTripThroughStdinAndStdout) {
  const json config = {
      {"command",
       {"python3", "-c",
        "import json,sys; d=json.load(sys.stdin); d['n']+=1; print(json.dumps(d))"}},
      {"input", {{"n", 41}, {"s", "h\u00e9llo"}, {"list", {1, 2}}}}};
  absl::StatusOr<StepOutput> out = Run(config);
  ASSERT_OK(out);
  EXPECT_EQ(out->output, json({{"n", 42}, {"s", "h\u00e9llo"}, {"list", {1, 2}}}));
  EXPECT_EQ(out->stderr_tail, "");
}

TEST_F(ExecStepTest, StringCommandRunsThroughShellWithEmptyObjectInputByDefault) {
  absl::StatusOr<StepOutput> out = Run({{"command", "read line; echo \"{\\\"in\\\": $line}\""}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output, json({{"in", json::object()}}));
}

TEST_F(ExecStepTest, ChildRunsUnderTheNormalPolicyFromABatchThread) {
  // Executor threads may run under SCHED_BATCH (EngineOptions); the step's
  // process must not inherit it.
  absl::StatusOr<StepOutput> out;
  int thread_policy = -1;
  std::thread t([&] {
    sched_param param{};
    ASSERT_EQ(pthread_setschedparam(pthread_self(), SCHED_BATCH, &param), 0);
    thread_policy = sched_getscheduler(0);
    out = Run(
        {{"command",
          {"python3", "-c", "import os; print('{\"policy\": %d}' % os.sched_getscheduler(0))"}}});
  });
  t.join();
  EXPECT_EQ(thread_policy, SCHED_BATCH);
  ASSERT_OK(out);
  EXPECT_EQ(out->output, json({{"policy", SCHED_OTHER}}));
}

TEST_F(ExecStepTest, EmptyStdoutIsEmptyObject) {
  absl::StatusOr<StepOutput> out = Run({{"command", "echo only-logs >&2"}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output, json::object());
  EXPECT_EQ(out->stderr_tail, "only-logs\n");
}

TEST_F(ExecStepTest, NonJsonStdoutIsInvalid) {
  absl::StatusOr<StepOutput> out = Run({{"command", "echo hello"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(out.status().message()),
              StartsWith("step output is not a JSON object: hello"));

  out = Run({{"command", "echo '[1, 2]'"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("got array"));

  out = Run({{"command", "echo '{}'; echo '{}'"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(ExecStepTest, NonzeroExitReportsLastStderrLineAndTail) {
  absl::StatusOr<StepOutput> out =
      Run({{"command", "echo first >&2; echo 'boom happened' >&2; echo '{}'; exit 3"}});
  ASSERT_THAT(out, StatusIs(absl::StatusCode::kUnknown));
  const std::string msg(out.status().message());
  EXPECT_THAT(msg, StartsWith("exit code 3: boom happened\n"));
  EXPECT_THAT(msg, HasSubstr("first\nboom happened"));
  auto tail = out.status().GetPayload(kStderrTailPayload);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(std::string(*tail), "first\nboom happened\n");
}

TEST_F(ExecStepTest, NonzeroExitWithoutStderr) {
  absl::StatusOr<StepOutput> out = Run({{"command", "exit 2"}});
  ASSERT_THAT(out, StatusIs(absl::StatusCode::kUnknown));
  EXPECT_EQ(out.status().message(), "exit code 2 (no stderr output)");
}

TEST_F(ExecStepTest, ExitTempFailIsUnavailable) {
  absl::StatusOr<StepOutput> out = Run({{"command", "echo 'try later' >&2; exit 75"}});
  ASSERT_THAT(out, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("try later"));
}

TEST_F(ExecStepTest, KilledBySignalNamesTheSignal) {
  absl::StatusOr<StepOutput> out = Run({{"command", {"/bin/sh", "-c", "kill -SEGV $$"}}});
  ASSERT_THAT(out, StatusIs(absl::StatusCode::kUnknown));
  EXPECT_THAT(std::string(out.status().message()), StartsWith("killed by signal SIGSEGV"));
}

TEST_F(ExecStepTest, StderrTailKeepsTheLast4KiB) {
  absl::StatusOr<StepOutput> out =
      Run({{"command",
            {"python3", "-c", "import sys; sys.stderr.write('x' * 20000 + 'END'); print('{}')"}}});
  ASSERT_OK(out);
  EXPECT_EQ(out->stderr_tail.size(), 4096u);
  EXPECT_TRUE(absl::EndsWith(out->stderr_tail, "xxxEND"));
}

TEST_F(ExecStepTest, TimeoutKillsTheWholeProcessGroupIncludingGrandchildren) {
  // Orphaned grandchildren are re-parented to this process, so the test can
  // reap them and then prove they are gone (PID 1 here may never reap).
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::string pid_file = dir_ + "/grandchild.pid";
  TestStepContext ctx(RealClock(), dir_);
  const absl::Time start = RealClock()->Now();
  ctx.set_deadline(start + absl::Milliseconds(400));
  absl::StatusOr<StepOutput> out =
      Run(ctx, {{"command", "sleep 30 & echo $! > grandchild.pid; echo started >&2; wait"}});
  const absl::Duration elapsed = RealClock()->Now() - start;
  ASSERT_THAT(out, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("started"));
  EXPECT_LT(elapsed, absl::Seconds(2));

  pid_t grandchild = 0;
  std::ifstream(pid_file) >> grandchild;
  ASSERT_GT(grandchild, 0);
  // SIGKILL was sent before Execute returned; reaping takes at most moments.
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 400 && reaped == 0; ++i) {
    reaped = waitpid(grandchild, &status, WNOHANG);
    if (reaped == 0) {
      RealClock()->SleepFor(absl::Milliseconds(5));
    }
  }
  if (reaped == -1 && errno == ECHILD) {
    // The group's SIGKILL can end the sleep while the shell still sits in
    // `wait`: the shell then reaps it before dying itself, and it never
    // becomes ours. The shell is gone (Execute reaped it), so a grandchild
    // still alive would have been re-parented here; it was not.
  } else {
    ASSERT_EQ(reaped, grandchild) << "the grandchild survived the timeout";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }
  EXPECT_EQ(kill(grandchild, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(ExecStepTest, StopRequestKillsAtOnce) {
  TestStepContext ctx(RealClock(), dir_);
  absl::StatusOr<StepOutput> out;
  const absl::Time start = RealClock()->Now();
  std::thread runner([&] { out = exec_->Execute(ctx, {{"command", "sleep 30"}}); });
  ctx.AwaitOnStopRegistered();
  ctx.Stop();
  runner.join();
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(RealClock()->Now() - start, absl::Seconds(2));
  EXPECT_FALSE(ctx.has_on_stop()) << "the step must clear its stop callback";
}

TEST_F(ExecStepTest, StoppedBeforeStartDoesNotRun) {
  TestStepContext ctx(RealClock(), dir_);
  ctx.Stop();
  EXPECT_THAT(exec_->Execute(ctx, {{"command", "touch ran"}}),
              StatusIs(absl::StatusCode::kCancelled));
  struct stat st;
  EXPECT_NE(stat((dir_ + "/ran").c_str(), &st), 0);
}

TEST_F(ExecStepTest, LargeOutputsAndInputDoNotDeadlock) {
  // The child fills stderr before reading stdin and only then writes stdout:
  // a parent that wrote all of stdin first, or read one pipe at a time,
  // would block forever.
  const std::string big(1'000'000, 'i');
  absl::StatusOr<StepOutput> out =
      Run({{"command",
            {"python3", "-c",
             "import json,sys\n"
             "sys.stderr.write('e' * 1000000); sys.stderr.flush()\n"
             "d = json.load(sys.stdin)\n"
             "print(json.dumps({'data': 'x' * 1000000, 'in_len': len(d['big'])}))"}},
           {"input", {{"big", big}}}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["in_len"], 1'000'000);
  EXPECT_EQ(out->output["data"].get<std::string>().size(), 1'000'000u);
  EXPECT_EQ(out->stderr_tail, std::string(4096, 'e'));
}

TEST_F(ExecStepTest, ChildThatIgnoresStdinDoesNotBreakTheParent) {
  // Writing to a pipe nobody reads raises SIGPIPE unless it is handled.
  absl::StatusOr<StepOutput> out =
      Run({{"command", "echo '{\"ok\": true}'"}, {"input", {{"big", std::string(1 << 20, 'z')}}}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output, json({{"ok", true}}));
}

TEST_F(ExecStepTest, CwdIsRelativeToTheWorkingDirAndEnvIsAdded) {
  ASSERT_EQ(mkdir((dir_ + "/sub").c_str(), 0755), 0);
  const json command =
      "printf '{\"cwd\": \"%s\", \"foo\": \"%s\", \"n\": \"%s\", \"path\": %s}' "
      "\"$(pwd -P)\" \"$FOO\" \"$N\" \"${PATH:+true}\"";
  absl::StatusOr<StepOutput> out =
      Run({{"command", command}, {"cwd", "sub"}, {"env", {{"FOO", "bar"}, {"N", 3}}}});
  ASSERT_OK(out);
  char* real = realpath((dir_ + "/sub").c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  EXPECT_EQ(out->output["cwd"], std::string(real));
  free(real);
  EXPECT_EQ(out->output["foo"], "bar");
  EXPECT_EQ(out->output["n"], "3");
  EXPECT_EQ(out->output["path"], true);

  // Default: the working dir; "" = this process's cwd.
  out = Run({{"command", command}});
  ASSERT_OK(out);
  real = realpath(dir_.c_str(), nullptr);
  EXPECT_EQ(out->output["cwd"], std::string(real));
  free(real);
  out = Run({{"command", command}, {"cwd", ""}});
  ASSERT_OK(out);
  real = getcwd(nullptr, 0);
  EXPECT_EQ(out->output["cwd"], std::string(real));
  free(real);
}

TEST_F(ExecStepTest, ChildHasItsOwnProcessGroupAndNoLeakedFds) {
  const int fds_before = CountOpenFds();
  // The group is led by the command's guard (its parent), not by this process.
  absl::StatusOr<StepOutput> out =
      Run({{"command",
            {"python3", "-c",
             "import json,os; fds = os.listdir('/proc/self/fd'); "
             "print(json.dumps({'guard_leads': os.getpgid(0) == os.getppid(), "
             "'pgid': os.getpgid(0), 'fds': len(fds)}))"}}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["guard_leads"], true);
  EXPECT_NE(out->output["pgid"], static_cast<int>(getpgrp()));
  // 0, 1, 2 and the directory listdir itself opened.
  EXPECT_EQ(out->output["fds"], 4);
  EXPECT_EQ(CountOpenFds(), fds_before);
}

TEST_F(ExecStepTest, StartFailuresAreInvalidArguments) {
  EXPECT_THAT(Run({{"command", {"/nonexistent/program"}}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Run({{"command", "true"}, {"cwd", "missing-dir"}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(ExecStepTest, LostExitStatusIsAnErrorNotSuccess) {
  // With SIGCHLD ignored the kernel reaps children itself; the step must not
  // mistake the missing status for exit code 0.
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old = {};
  ASSERT_EQ(sigaction(SIGCHLD, &ignore, &old), 0);
  absl::StatusOr<StepOutput> out = Run({{"command", "exit 1"}});
  ASSERT_EQ(sigaction(SIGCHLD, &old, nullptr), 0);
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInternal));
}

TEST_F(ExecStepTest, ValidateNamesTheBadKey) {
  absl::Status s = exec_->Validate(MakeDef("exec", {{"comand", "true"}}));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(s.message(),
            "exec step: unknown key 'comand'; allowed keys: command, cwd, env, input, "
            "unsafe_shell_templates");

  s = exec_->Validate(MakeDef("exec", json::object()));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing required key 'command'"));

  EXPECT_THAT(exec_->Validate(MakeDef("exec", {{"command", 3}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(exec_->Validate(MakeDef("exec", {{"command", {"ls", 3}}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(exec_->Validate(MakeDef("exec", {{"command", "  "}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(exec_->Validate(MakeDef("exec", {{"command", "true"}, {"env", {{"1X", "a"}}}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(exec_->Validate(MakeDef("exec", {{"command", "true"}, {"env", {{"X", {1}}}}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(exec_->Validate(MakeDef("exec", {{"command", "true"}, {"cwd", 1}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(exec_->Validate(MakeDef("exec", json::array())),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Templates are checked after resolution.
  EXPECT_OK(exec_->Validate(MakeDef("exec", {{"command", json::array({"run", "{{ inputs.cmd }}"})},
                                             {"env", "{{ inputs.env }}"},
                                             {"input", "{{ x }}"}})));
}

// Issue 8, finding 5: a template inside code a shell or interpreter runs is
// refused at load time unless the step opts in; as data it is fine.
TEST_F(ExecStepTest, TemplatesInsideShellCodeAreRefusedUnlessOptedIn) {
  const std::vector<json> refused = {
      "echo {{ inputs.v }} > out.txt",  // a string command runs under /bin/sh -c
      json::array({"sh", "-c", "echo {{ inputs.v }} > out.txt"}),
      json::array({"/bin/bash", "-euc", "echo {{ inputs.v }}"}),
      json::array({"env", "LC_ALL=C", "bash", "-c", "echo {{ inputs.v }}"}),
      json::array({"python3", "-c", "print('{{ inputs.v }}')"}),
      json::array({"node", "-e", "console.log('{{ inputs.v }}')"}),
      "{{ inputs.cmd }}",
  };
  for (const json& command : refused) {
    EXPECT_THAT(exec_->Validate(MakeDef("exec", {{"command", command}})),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::AllOf(::testing::HasSubstr("$(touch pwned)"),
                                          ::testing::HasSubstr("unsafe_shell_templates"))))
        << command.dump();
    EXPECT_OK(
        exec_->Validate(MakeDef("exec", {{"command", command}, {"unsafe_shell_templates", true}})));
  }
  const std::vector<json> data = {
      json::array({"sh", "-c", "echo \"$1\" > out.txt", "sh", "{{ inputs.v }}"}),
      json::array({"echo", "{{ inputs.v }}"}),
      json::array({"python3", "step.py", "{{ inputs.v }}"}),
      "echo \"$V\"",
  };
  for (const json& command : data) {
    EXPECT_OK(exec_->Validate(
        MakeDef("exec", {{"command", command}, {"env", {{"V", "{{ inputs.v }}"}}}})))
        << command.dump();
  }
  EXPECT_THAT(
      exec_->Validate(MakeDef("exec", {{"command", "true"}, {"unsafe_shell_templates", "yes"}})),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace runloom
