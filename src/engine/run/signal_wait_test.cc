// Signals (issue 23): a `wait` step parks its run `waiting` with no lease
// and no executor until a signal of its name comes; a signal sent before
// the run reaches the wait is kept in the run's mailbox and consumed in
// order; a timeout fails the step as a timeout; exactly one of signal,
// timeout and cancel resolves a wait; bad signals are refused with nothing
// kept, naming the field.
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;

constexpr char kPay[] = R"(
name: pay
steps:
  - {id: before, kind: noop, phase: start}
  - id: paid
    kind: wait
    phase: wait
    signal: payment
    timeout: 1h
    schema: {type: object, required: [amount], properties: {amount: {type: integer}}}
  - {id: after, kind: noop, phase: end}
)";

std::string Start(Harness& h, const std::string& yaml) {
  auto wf = LoadWorkflowYaml(yaml, "pay.yaml");
  EXPECT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  EXPECT_OK(started);
  return started.ok() ? started->run.id : "";
}

SignalRequest Payment(int amount, std::string key = "") {
  return {.name = "payment", .payload = {{"amount", amount}}, .idempotency_key = std::move(key)};
}

TEST(Signals, AWaitParksTheRunAndASignalResolvesItAndIsTheStepsOutput) {
  SimulatedClock clock;
  Harness h({}, &clock);
  const std::string id = Start(h, kPay);
  absl::StatusOr<RunRecord> parked = h.engine->ExecuteRun(id);
  ASSERT_OK(parked);
  ASSERT_EQ(parked->status, RunStatus::kWaiting);
  EXPECT_TRUE(parked->lease_token.empty());
  EXPECT_EQ(parked->wait_signal, "payment");
  ASSERT_TRUE(parked->wake_at.has_value());  // the timeout
  EXPECT_EQ(*parked->wake_at, clock.Now() + absl::Hours(1));
  EXPECT_EQ(h.Steps(id).count("paid"), 0u);
  std::vector<Event> events = h.Events(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, "run.waiting");
  EXPECT_EQ(events.back().data["for"], "signal");
  EXPECT_EQ(events.back().data["signal"], "payment");
  EXPECT_THAT(h.engine->ExecuteRun(id), StatusIs(absl::StatusCode::kFailedPrecondition));

  absl::StatusOr<SendSignalResult> sent = h.engine->Signal(id, Payment(42), "operator:bob");
  ASSERT_OK(sent);
  EXPECT_TRUE(sent->created);
  EXPECT_TRUE(sent->resolved);
  EXPECT_EQ(sent->signal.seq, 1);
  EXPECT_EQ(sent->signal.consumed_by, "1:paid");
  RunRecord queued = h.Run(id);
  EXPECT_EQ(queued.status, RunStatus::kQueued);
  EXPECT_EQ(queued.wait_signal, "");
  EXPECT_EQ(queued.wake_at, std::nullopt);
  EXPECT_EQ(queued.attempts, 0);
  std::vector<std::string> types;
  for (const Event& e : h.Events(id)) types.push_back(e.type);
  EXPECT_THAT(types, ::testing::IsSupersetOf({"signal.received", "run.resumed"}));
  for (const Event& e : h.Events(id)) {
    if (e.type != "signal.received") continue;
    EXPECT_EQ(e.data["by"], "operator:bob");
    EXPECT_EQ(e.data["resolved"], true);
    EXPECT_EQ(e.data["seq"], 1);
  }

  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  std::map<std::string, StepRecord> steps = h.Steps(id);
  ASSERT_EQ(steps.count("paid"), 1u);
  EXPECT_EQ(steps["paid"].state, StepState::kSucceeded);
  EXPECT_EQ(steps["paid"].output, (nlohmann::json{{"amount", 42}}));
  EXPECT_EQ(steps["before"].attempt, 1);  // not run again
  // The timeout that was set never fires on a run that moved on.
  clock.Advance(absl::Hours(2));
  ASSERT_OK(h.engine->SweepOnce());
  EXPECT_EQ(h.Run(id).status, RunStatus::kCompleted);
}

TEST(Signals, SignalsSentBeforeTheWaitAreKeptAndConsumedInOrder) {
  Harness h;
  const std::string id = Start(h, R"(
name: twice
steps:
  - {id: first, kind: wait, signal: go}
  - {id: second, kind: wait, signal: go}
)");
  for (int i = 1; i <= 3; ++i) {
    absl::StatusOr<SendSignalResult> sent =
        h.engine->Signal(id, {.name = "go", .payload = i}, "tester");
    ASSERT_OK(sent);
    EXPECT_FALSE(sent->resolved);  // the run is queued, not waiting
    EXPECT_EQ(sent->signal.seq, i);
  }
  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);  // never parked
  std::map<std::string, StepRecord> steps = h.Steps(id);
  EXPECT_EQ(steps["first"].output, 1);
  EXPECT_EQ(steps["second"].output, 2);
  absl::StatusOr<std::vector<SignalRecord>> all = h.engine->store()->ListSignals(id, 0, 100);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].consumed_by, "1:first");
  EXPECT_EQ((*all)[1].consumed_by, "1:second");
  EXPECT_EQ((*all)[2].consumed_by, "");  // the third stays in the mailbox
  for (const Event& e : h.Events(id)) EXPECT_NE(e.type, "run.waiting");
}

TEST(Signals, ATimeoutFailsTheStepAsATimeoutAndALaterSignalStaysInTheMailbox) {
  SimulatedClock clock;
  Harness h({}, &clock);
  const std::string id = Start(h, R"(
name: late
steps:
  - {id: w, kind: wait, signal: go, timeout: 10m}
)");
  ASSERT_EQ(h.engine->ExecuteRun(id)->status, RunStatus::kWaiting);
  clock.Advance(absl::Minutes(10));
  ASSERT_OK(h.engine->SweepOnce());
  EXPECT_EQ(h.Run(id).status, RunStatus::kQueued);
  // The timer won: a signal now resolves nothing.
  absl::StatusOr<SendSignalResult> sent = h.engine->Signal(id, {.name = "go"}, "tester");
  ASSERT_OK(sent);
  EXPECT_FALSE(sent->resolved);
  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kFailed);
  std::map<std::string, StepRecord> steps = h.Steps(id);
  EXPECT_EQ(steps["w"].state, StepState::kFailed);
  EXPECT_EQ(steps["w"].error_class, ErrorClass::kTimeout);
  absl::StatusOr<std::vector<SignalRecord>> all = h.engine->store()->ListSignals(id, 0, 100);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].consumed_by, "");
}

TEST(Signals, BadSignalsAreRefusedNamingTheFieldAndNothingIsKept) {
  Harness h;
  const std::string id = Start(h, kPay);
  EXPECT_THAT(h.engine->Signal(id, {.name = "nope"}, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::StartsWith("name:")));
  EXPECT_THAT(h.engine->Signal(id, {.name = "bad name!"}, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::StartsWith("name:")));
  EXPECT_THAT(h.engine->Signal(id, {.name = "payment", .payload = {{"amount", "ten"}}}, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("payload")));
  EXPECT_THAT(h.engine->Signal(id, {.name = "payment", .payload = std::string(70000, 'x')}, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::StartsWith("payload:")));
  EXPECT_THAT(h.engine->Signal(id, {.name = "payment", .idempotency_key = std::string(300, 'k')},
                               "t"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::StartsWith("idempotency_key:")));
  EXPECT_THAT(h.engine->Signal("r_0000000000000000000000", Payment(1), "t"),
              StatusIs(absl::StatusCode::kNotFound));
  absl::StatusOr<std::vector<SignalRecord>> none = h.engine->store()->ListSignals(id, 0, 100);
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
  const int64_t events = h.Run(id).last_event_seq;
  // The same idempotency key twice keeps one signal.
  absl::StatusOr<SendSignalResult> a = h.engine->Signal(id, Payment(5, "k1"), "t");
  absl::StatusOr<SendSignalResult> b = h.engine->Signal(id, Payment(5, "k1"), "t");
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_TRUE(a->created);
  EXPECT_FALSE(b->created);
  EXPECT_EQ(a->signal.seq, b->signal.seq);
  EXPECT_EQ(h.Run(id).last_event_seq, events + 1);
  // A finished run takes none.
  ASSERT_OK(h.engine->Cancel(id, "t"));
  EXPECT_THAT(h.engine->Signal(id, Payment(1), "t"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(Signals, DefaultsTimeoutDoesNotBoundAWait) {
  SimulatedClock clock;
  Harness h({}, &clock);
  const std::string id = Start(h, R"(
name: patient
defaults: {timeout: 30s}
steps:
  - {id: w, kind: wait, signal: go}
)");
  absl::StatusOr<RunRecord> parked = h.engine->ExecuteRun(id);
  ASSERT_OK(parked);
  ASSERT_EQ(parked->status, RunStatus::kWaiting);
  EXPECT_FALSE(parked->wake_at.has_value());  // no timeout: only a signal moves it
}

TEST(Signals, AWaitStepIsValidatedWhenTheWorkflowIsStarted) {
  Harness h;
  for (const char* yaml : {
           "name: a\nsteps:\n  - {id: w, kind: wait}\n",
           "name: a\nsteps:\n  - {id: w, kind: wait, signal: go, timeout: soon}\n",
           "name: a\nsteps:\n  - {id: w, kind: wait, signal: go, colour: red}\n",
           "name: a\nsteps:\n  - {id: w, kind: wait, signal: 'no way'}\n",
           "name: a\nsteps:\n  - id: p\n    kind: parallel\n    branches:\n"
           "      - {name: b, steps: [{id: w, kind: wait, signal: go}]}\n",
       }) {
    // The loader refuses what it knows (a bad duration), the engine the rest.
    absl::StatusOr<Workflow> wf = LoadWorkflowYaml(yaml, "a.yaml");
    absl::Status refused =
        wf.ok() ? h.engine->StartRun({.workflow = *wf}).status() : wf.status();
    EXPECT_THAT(refused,
                StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("step 'w'")))
        << yaml;
  }
}

TEST(Signals, CancelRerunAndResetActOnARunWaitingForASignalAtOnce) {
  Harness h;
  const std::string a = Start(h, kPay);
  ASSERT_EQ(h.engine->ExecuteRun(a)->status, RunStatus::kWaiting);
  absl::StatusOr<RunRecord> cancelled = h.engine->Cancel(a, "tester");
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->status, RunStatus::kCancelled);
  EXPECT_THAT(h.engine->Signal(a, Payment(1), "t"),
              StatusIs(absl::StatusCode::kFailedPrecondition));

  const std::string b = Start(h, kPay);
  ASSERT_EQ(h.engine->ExecuteRun(b)->status, RunStatus::kWaiting);
  absl::StatusOr<RunRecord> rerun = h.engine->Rerun(b, "start", "", "tester");
  ASSERT_OK(rerun);
  EXPECT_EQ(rerun->status, RunStatus::kQueued);
  // The new revision waits at a wait of its own: a signal now is kept, then
  // consumed by revision 2's wait.
  absl::StatusOr<SendSignalResult> sent = h.engine->Signal(b, Payment(7), "t");
  ASSERT_OK(sent);
  EXPECT_FALSE(sent->resolved);
  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(b);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  EXPECT_EQ(h.Steps(b)["paid"].output, (nlohmann::json{{"amount", 7}}));
  absl::StatusOr<std::vector<SignalRecord>> all = h.engine->store()->ListSignals(b, 0, 10);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].consumed_by, "2:paid");

  const std::string c = Start(h, kPay);
  ASSERT_EQ(h.engine->ExecuteRun(c)->status, RunStatus::kWaiting);
  absl::StatusOr<int> reset = h.engine->ResetAll("admin");
  ASSERT_OK(reset);
  EXPECT_EQ(h.Run(c).status, RunStatus::kCancelled);
}

}  // namespace
}  // namespace runloom
