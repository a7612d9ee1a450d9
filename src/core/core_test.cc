#include "runloom/auth.h"
#include "runloom/budget_ledger.h"
#include "runloom/clock.h"

#include "core/crash_point.h"
#include "core/digest.h"
#include "core/duration.h"
#include "core/escape.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/log_line.h"
#include "testing/capturing_logger.h"

#include "absl/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace runloom {
namespace {

// A logger that keeps warnings and errors and remembers the last line.
class WarningsOnly final : public Logger {
 public:
  void Log(LogLevel, std::string_view message) override { last = std::string(message); }
  LogLevel min_level() const override { return LogLevel::kWarning; }
  std::string last;
};

TEST(Log, FormatsOnlyLinesTheLoggerKeeps) {
  WarningsOnly logger;
  Log(&logger, LogLevel::kWarning, "ack of ", 42, " failed");
  EXPECT_EQ(logger.last, "ack of 42 failed");
  Log(&logger, LogLevel::kInfo, "skipped");
  EXPECT_EQ(logger.last, "ack of 42 failed");
}

TEST(Log, CapturingLoggerCountsByLevelAndText) {
  testing::CapturingLogger log;
  Log(&log, LogLevel::kInfo, "lease renewed");
  Log(&log, LogLevel::kError, "lease renewal failed: unavailable");
  EXPECT_EQ(log.Count(LogLevel::kWarning, "lease"), 1);
  EXPECT_EQ(log.Count(LogLevel::kDebug, "lease"), 2);
  EXPECT_EQ(ToString(LogLevel::kWarning), "warning");
}

TEST(Log, DefaultAndNullLoggersAreUsable) {
  ASSERT_NE(DefaultLogger(), nullptr);
  EXPECT_EQ(DefaultLogger(), DefaultLogger());
  NullLogger()->Log(LogLevel::kError, "dropped");
  EXPECT_EQ(NullLogger()->min_level(), LogLevel::kError);
}

// A logger written before LogFields existed: it overrides Log alone.
TEST(Log, FieldsReachAnOldLoggerAsThePlainMessage) {
  WarningsOnly logger;
  Log(&logger, LogLevel::kError, {.run_id = "r_1", .attempt = 2}, "run ", "r_1", ": lost");
  EXPECT_EQ(logger.last, "run r_1: lost");
  testing::CapturingLogger log;
  Log(&log, LogLevel::kInfo, {.run_id = "r_1", .step = "a/b[0]", .attempt = 3, .worker = "h:1:0"},
      "x");
  ASSERT_EQ(log.lines().size(), 1u);
  EXPECT_EQ(log.lines()[0].run_id, "r_1");
  EXPECT_EQ(log.lines()[0].step, "a/b[0]");
  EXPECT_EQ(log.lines()[0].attempt, 3);
  EXPECT_EQ(log.lines()[0].worker, "h:1:0");
}

// 2026-12-05T22:10:03.123Z
absl::Time LogTestTime() { return absl::FromUnixMillis(1796508603123); }

TEST(LogLine, TextHasAUtcTimestampTheLevelAndTheFieldsThatApply) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, LogTestTime(), LogLevel::kWarning, "ack failed", {}),
            "2026-12-05T22:10:03.123Z [runloom] [warning] ack failed");
  EXPECT_EQ(FormatLogLine(LogFormat::kText, LogTestTime(), LogLevel::kInfo, "m",
                          {.run_id = "r_1", .step = "s", .attempt = 2, .worker = "h:7:0"}),
            "2026-12-05T22:10:03.123Z [runloom] [info] m run_id=r_1 step=s attempt=2 "
            "worker=h:7:0");
  EXPECT_EQ(FormatLogLine(LogFormat::kText, LogTestTime(), LogLevel::kError, "a\nb\tc\x01",
                          {.worker = "w\n"}),
            "2026-12-05T22:10:03.123Z [runloom] [error] a\\nb\\tc\\x01 worker=w\\n");
}

TEST(LogLine, JsonHasTsLevelMsgAndOnlyTheFieldsThatApply) {
  const nlohmann::json bare = nlohmann::json::parse(
      FormatLogLine(LogFormat::kJson, LogTestTime(), LogLevel::kDebug, "claimed", {}));
  EXPECT_EQ(bare, nlohmann::json::parse(
                      R"({"ts":"2026-12-05T22:10:03.123Z","level":"debug","msg":"claimed"})"));
  const std::string line =
      FormatLogLine(LogFormat::kJson, LogTestTime(), LogLevel::kWarning, "m",
                    {.run_id = "r_1", .step = "a/b[0]", .attempt = 2, .worker = "h:7:0"});
  EXPECT_THAT(line,
              ::testing::StartsWith(R"({"ts":"2026-12-05T22:10:03.123Z","level":"warning",)"));
  const nlohmann::json all = nlohmann::json::parse(line);
  EXPECT_EQ(all["msg"], "m");
  EXPECT_EQ(all["run_id"], "r_1");
  EXPECT_EQ(all["step"], "a/b[0]");
  EXPECT_EQ(all["attempt"], 2);
  EXPECT_EQ(all["worker"], "h:7:0");
  const nlohmann::json some = nlohmann::json::parse(
      FormatLogLine(LogFormat::kJson, LogTestTime(), LogLevel::kInfo, "m", {.run_id = "r_2"}));
  EXPECT_EQ(some.size(), 4u) << some.dump();
  EXPECT_EQ(some["run_id"], "r_2");
}

// A message with newlines, quotes, control characters and bytes that are not
// UTF-8 stays one line that parses, with the text kept.
TEST(LogLine, AHostileMessageStaysOneParseableLine) {
  const std::string hostile = "a\nb\r\"c\"}\n{\"level\":\"error\"}\t\x01\x1b[31m\\ \xff\xfe end";
  for (LogFormat format : {LogFormat::kText, LogFormat::kJson}) {
    const std::string line = FormatLogLine(format, LogTestTime(), LogLevel::kError, hostile,
                                           {.run_id = "r_\n1", .step = "s\"t"});
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    EXPECT_EQ(line.find('\r'), std::string::npos) << line;
    for (const char c : line) {
      EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << line;
    }
  }
  const nlohmann::json j =
      nlohmann::json::parse(FormatLogLine(LogFormat::kJson, LogTestTime(), LogLevel::kError,
                                          hostile, {.run_id = "r_\n1", .step = "s\"t"}));
  EXPECT_EQ(j["level"], "error");
  EXPECT_THAT(j["msg"].get<std::string>(),
              ::testing::StartsWith("a\nb\r\"c\"}\n{\"level\":\"error\"}\t\x01\x1b[31m\\ "));
  EXPECT_EQ(j["run_id"], "r_\n1");
  EXPECT_EQ(j["step"], "s\"t");
}

TEST(LogLine, FormatNames) {
  EXPECT_EQ(ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(ParseLogFormat("JSON"), std::nullopt);
  EXPECT_EQ(ParseLogFormat(""), std::nullopt);
}

TEST(Escape, PercentDecodeTakesTwoHexDigitsOfEitherCaseAndRefusesTheRest) {
  EXPECT_EQ(PercentDecode("a%3Db%3d+c", false), "a=b=+c");
  EXPECT_EQ(PercentDecode("a+b%20c", true), "a b c");
  EXPECT_EQ(PercentDecode("", false), "");
  EXPECT_EQ(PercentDecode("%00", false), std::string(1, '\0'));
  EXPECT_EQ(PercentDecode("100%", false), std::nullopt);
  EXPECT_EQ(PercentDecode("%4", false), std::nullopt);
  EXPECT_EQ(PercentDecode("%zz", false), std::nullopt);
  EXPECT_EQ(HexValue('f'), 15);
  EXPECT_EQ(HexValue('F'), 15);
  EXPECT_EQ(HexValue('g'), -1);
}

TEST(Digest, Sha256KnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Digest, CanonicalJsonIgnoresKeyOrder) {
  auto a = nlohmann::json::parse(R"({"b":1,"a":[1,2,{"y":1,"x":2}]})");
  auto b = nlohmann::json::parse(R"({ "a" : [1,2,{"x":2,"y":1}], "b" : 1 })");
  EXPECT_EQ(CanonicalJson(a), CanonicalJson(b));
  EXPECT_EQ(JsonDigest(a), JsonDigest(b));
  EXPECT_NE(JsonDigest(a), JsonDigest(nlohmann::json::parse(R"({"b":2})")));
}

TEST(Duration, ParsesUnitsAndRejectsJunk) {
  EXPECT_EQ(*ParseDuration("250ms"), absl::Milliseconds(250));
  EXPECT_EQ(*ParseDuration("1m30s"), absl::Seconds(90));
  EXPECT_FALSE(ParseDuration("ten").ok());
  EXPECT_FALSE(ParseDuration("-1s").ok());
  EXPECT_FALSE(ParseDuration("").ok());
}

TEST(Ids, RunIdsAreUniqueAndTimeOrdered) {
  absl::BitGen gen;
  auto a = NewRunId(absl::FromUnixSeconds(100), gen);
  auto b = NewRunId(absl::FromUnixSeconds(200), gen);
  EXPECT_LT(a, b);
  EXPECT_NE(NewRunId(absl::FromUnixSeconds(100), gen), a);
  EXPECT_EQ(NewToken(gen).size(), 32u);
}

TEST(SimulatedClock, SleeperWakesOnlyWhenAdvanced) {
  SimulatedClock clock;
  absl::Time start = clock.Now();
  std::atomic<bool> woke{false};
  std::thread t([&] {
    clock.SleepUntil(start + absl::Seconds(10));
    woke = true;
  });
  clock.Advance(absl::Seconds(5));
  EXPECT_FALSE(woke.load());
  clock.Advance(absl::Seconds(5));
  t.join();
  EXPECT_TRUE(woke.load());
  EXPECT_EQ(clock.Now() - start, absl::Seconds(10));
}

TEST(SimulatedClock, AwaitWithDeadlineReturnsAtSimulatedDeadline) {
  SimulatedClock clock;
  runloom::Mutex mu;
  bool flag = false;
  absl::Time deadline = clock.Now() + absl::Seconds(2);
  std::thread t([&] { clock.Advance(absl::Seconds(3)); });
  {
    runloom::MutexLock l(&mu);
    EXPECT_FALSE(clock.AwaitWithDeadline(&mu, absl::Condition(&flag), deadline));
  }
  t.join();
}

TEST(CrashPoint, NamesRoundTrip) {
  EXPECT_FALSE(AllCrashPoints().empty());
  for (CrashPoint p : AllCrashPoints()) EXPECT_EQ(ParseCrashPoint(ToString(p)), p);
  EXPECT_EQ(ParseCrashPoint("no_such_point"), std::nullopt);
}

// A point not named by RUNLOOM_CRASH_AT, or a hit before the named one, does
// nothing.
TEST(CrashPoint, OnlyTheNamedHitKills) {
  setenv("RUNLOOM_CRASH_AT", "after_store_commit:2", 1);
  EXPECT_EXIT(
      {
        RUNLOOM_CRASH_POINT(CrashPoint::kBeforeStoreCommit);
        RUNLOOM_CRASH_POINT(CrashPoint::kAfterStoreCommit);  // hit 1: lives
        RUNLOOM_CRASH_POINT(CrashPoint::kAfterStoreCommit);  // hit 2: dies here
        std::exit(0);
      },
#ifdef RUNLOOM_TESTING
      ::testing::KilledBySignal(SIGKILL), "crash point after_store_commit hit 2");
#else
      // Without RUNLOOM_TESTING crash points compile to nothing.
      ::testing::ExitedWithCode(0), "");
#endif
  unsetenv("RUNLOOM_CRASH_AT");
}

TEST(SyncPoint, CallsTheInstalledCallbackInTestBuilds) {
  std::vector<std::string> seen;
  SetSyncPointCallback([&seen](std::string_view name) { seen.emplace_back(name); });
  RUNLOOM_SYNC_POINT("core_test.one");
  RUNLOOM_SYNC_POINT("core_test.two");
  SetSyncPointCallback(nullptr);
  RUNLOOM_SYNC_POINT("core_test.after_removal");
#ifdef RUNLOOM_TESTING
  EXPECT_EQ(seen, (std::vector<std::string>{"core_test.one", "core_test.two"}));
#else
  EXPECT_TRUE(seen.empty());
#endif
}

}  // namespace
}  // namespace runloom

TEST(RoleTest, NamesRoundTripAndOrder) {
  for (runloom::Role r : {runloom::Role::kViewer, runloom::Role::kOperator,
                          runloom::Role::kApprover, runloom::Role::kAdmin}) {
    auto parsed = runloom::ParseRole(runloom::RoleName(r));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, r);
  }
  EXPECT_EQ(runloom::ParseRole("root").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(runloom::RoleAtLeast(runloom::Role::kAdmin, runloom::Role::kApprover));
  EXPECT_FALSE(runloom::RoleAtLeast(runloom::Role::kOperator, runloom::Role::kApprover));
}

// Amounts are exact decimals in micro-units, bounded, and refuse anything
// else (signs, exponents, too many digits) rather than round it.
TEST(AmountTest, ParsesExactlyAndRefusesTheRest) {
  EXPECT_EQ(runloom::ParseAmountMicros("2.50"), 2'500'000);
  EXPECT_EQ(runloom::ParseAmountMicros("0.000003"), 3);
  EXPECT_EQ(runloom::ParseAmountMicros("999999999999.999999"), 999'999'999'999'999'999);
  for (const char* bad : {"", ".5", "1.", "-1", "+1", "1e3", "0.0000001", "1,5", " 1", "1 ",
                          "9999999999999", "0x10", "1;rm -rf /", "\xff"}) {
    EXPECT_FALSE(runloom::ParseAmountMicros(bad).has_value()) << bad;
  }
  EXPECT_FALSE(runloom::ParseAmountMicros(std::string(1 << 20, '9')).has_value());
  EXPECT_EQ(runloom::FormatAmountMicros(2'500'000), "2.5");
  EXPECT_EQ(runloom::FormatAmountMicros(1), "0.000001");
  EXPECT_EQ(runloom::FormatAmountMicros(-40), "-0.00004");
  EXPECT_EQ(runloom::FormatAmountMicros(std::numeric_limits<int64_t>::min()),
            "-9223372036854.775808");
}
