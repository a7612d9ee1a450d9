#include "runloom/events.h"

#include "runloom/gate.h"

#include "core/ids.h"
#include "events/samples.h"
#include "events/specs.h"
#include "testing/status_matchers.h"

#include "absl/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string_view>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

const std::string kRun = "r_0000000000000000000001";
const std::string kDigest = "sha256:" + std::string(64, 'a');

// One event of every type, each valid as stored (run.started filled in).
std::vector<Event> OneOfEach() {
  return {
      RunCreatedEvent(kRun, {.workflow = "w",
                             .workflow_version = 1,
                             .workflow_digest = kDigest,
                             .inputs_digest = kDigest}),
      RunStartedEvent(kRun, {.attempt = 1, .lease_owner = "me", .entry = RunEntry::kRerun}),
      RunLeaseExpiredEvent(kRun, {.attempt = 1, .lease_owner = "me"}),
      RunDeadLetteredEvent(kRun, {.message_id = "3", .deliveries = 10, .reason = "cap"}),
      RunReleasedEvent(kRun, {.reason = "shutdown"}),
      RunPausedEvent(kRun, {.step_path = "gate"}),
      RunWaitingEvent(kRun, {.step_path = "nap", .until = "2026-11-29T21:50:05.123456Z"}),
      RunDecidedEvent(kRun, {.step_path = "gate",
                             .decision = "approve",
                             .reviewer = "alice",
                             .proposal_digest = kDigest}),
      RunResumedEvent(kRun, {.reason = "approved"}),
      RunCancelRequestedEvent(kRun, {.by = "bob"}),
      RunRerunRequestedEvent(kRun, {.from_phase = "research", .revision = 2, .by = "bob"}),
      RunFinishedEvent(kRun, {.status = RunStatus::kBudgetStopped}),
      StepStartedEvent(kRun, {.path = "a", .step_id = "a", .kind = "exec"}),
      StepSucceededEvent(kRun, {.path = "a", .step_id = "a", .duration_ms = 5}),
      StepFailedEvent(kRun, {.path = "a", .step_id = "a", .error = "boom"}),
      StepSkippedEvent(kRun, {.path = "b", .step_id = "b", .reason = "when: false"}),
      StepReusedEvent(kRun, {.path = "a", .step_id = "a"}),
      LlmCallEvent(kRun, {.path = "a",
                          .model = "fake",
                          .provider = "fake",
                          .outcome = "error",
                          .error_class = ErrorClass::kRateLimited,
                          .requests = 3}),
      [] {
        Event e = SignalReceivedEvent(kRun, {.name = "payment"});
        e.data["seq"] = 1;
        e.data["resolved"] = false;
        return e;
      }(),
  };
}

void ExpectSameEvent(const Event& a, const Event& b) {
  EXPECT_EQ(a.run_id, b.run_id);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.schema_version, b.schema_version);
  EXPECT_EQ(a.at, b.at);
  EXPECT_EQ(a.data, b.data);
}

TEST(Events, AllEventTypesAreDistinctAndNamed) {
  std::vector<std::string> types = AllEventTypes();
  EXPECT_EQ(types.size(), 19u);
  EXPECT_EQ(std::set<std::string>(types.begin(), types.end()).size(), types.size());
  for (const std::string& t : types) {
    EXPECT_EQ(EventSchemaVersion(t), 1) << t;
  }
  EXPECT_EQ(EventSchemaVersion("run.exploded"), 0);
}

TEST(Events, EveryFactoryMakesAValidEventThatRoundTrips) {
  std::vector<Event> events = OneOfEach();
  std::vector<std::string> types;
  int64_t seq = 0;
  for (Event& e : events) {
    types.push_back(e.type);
    EXPECT_EQ(e.run_id, kRun);
    EXPECT_EQ(e.schema_version, EventSchemaVersion(e.type)) << e.type;
    EXPECT_OK(ValidateEvent(e));
    e.seq = ++seq;
    e.at = absl::FromUnixMicros(1'795'988'700'123'456 + seq);
    nlohmann::json j = EventToJson(e);
    EXPECT_EQ(j["type"], e.type);
    EXPECT_EQ(j["schema_version"], e.schema_version);
    absl::StatusOr<Event> back = EventFromJson(j);
    ASSERT_OK(back) << j.dump();
    ExpectSameEvent(*back, e);
    absl::StatusOr<Event> reparsed = ParseEventJson(j.dump());
    ASSERT_OK(reparsed);
    ExpectSameEvent(*reparsed, e);
  }
  EXPECT_EQ(types, AllEventTypes());
}

TEST(Events, FactoriesWriteEveryField) {
  Event e = StepFailedEvent(kRun, {.path = "refine[2]/write",
                                   .step_id = "write",
                                   .attempt = 2,
                                   .error = "exit status 3",
                                   .error_class = ErrorClass::kRateLimited,
                                   .will_retry = true,
                                   .retry_in_ms = 1500});
  EXPECT_EQ(e.type, "step.failed");
  EXPECT_EQ(e.data, nlohmann::json::parse(R"({"path":"refine[2]/write","step_id":"write",
      "attempt":2,"error":"exit status 3","error_class":"rate_limited","will_retry":true,
      "retry_in_ms":1500})"));
  Event c = RunCreatedEvent(kRun, {.workflow = "w",
                                   .workflow_version = 4,
                                   .workflow_digest = kDigest,
                                   .inputs_digest = kDigest,
                                   .idempotency_key = "k1"});
  EXPECT_EQ(c.data["entry"], "fresh");
  EXPECT_EQ(c.data["idempotency_key"], "k1");
  EXPECT_EQ(c.data["workflow_version"], 4);
  Event s = RunStartedEvent(
      kRun, {.attempt = 3, .lease_owner = "w1", .revision = 2, .entry = RunEntry::kRevision});
  EXPECT_EQ(s.data, nlohmann::json::parse(
                        R"({"attempt":3,"lease_owner":"w1","revision":2,"entry":"revision"})"));
  Event f =
      RunFinishedEvent(kRun, {.status = RunStatus::kFailed, .outcome = "failed", .error = "x"});
  EXPECT_EQ(f.data, nlohmann::json::parse(R"({"status":"failed","outcome":"failed","error":"x"})"));
  Event p = RunPausedEvent(kRun, {.step_path = "gate", .proposal_digest = kDigest});
  EXPECT_EQ(p.data["proposal_digest"], kDigest);
  Event st = StepStartedEvent(kRun, {.path = "a", .step_id = "a", .kind = "llm", .phase = "draft"});
  EXPECT_EQ(st.data["phase"], "draft");
  EXPECT_EQ(st.data["attempt"], 1);
  Event sr = StepStartedEvent(kRun, {.path = "a",
                                     .step_id = "a",
                                     .kind = "llm",
                                     .attempt = 2,
                                     .phase = "draft",
                                     .revision = 3,
                                     .entry = RunEntry::kRerun});
  EXPECT_EQ(sr.data, nlohmann::json::parse(R"({"path":"a","step_id":"a","kind":"llm",
      "attempt":2,"phase":"draft","revision":3,"entry":"rerun"})"));
  EXPECT_OK(ValidateEvent(sr));
  Event d = RunDecidedEvent(kRun, {.step_path = "outline/review",
                                   .decision = "request_revision",
                                   .reviewer = "alice",
                                   .proposal_digest = kDigest,
                                   .feedback = "more sources",
                                   .rerun_from = "research",
                                   .revision = 2});
  EXPECT_EQ(d.type, "run.decided");
  EXPECT_EQ(d.data, nlohmann::json::parse(R"({"step_path":"outline/review",
      "decision":"request_revision","reviewer":"alice","proposal_digest":")" +
                                          kDigest +
                                          R"(","feedback":"more sources","rerun_from":"research",
      "revision":2})"));
  EXPECT_OK(ValidateEvent(d));
  Event r = RunRerunRequestedEvent(
      kRun, {.from_phase = "research", .revision = 3, .by = "operator:bob", .feedback = "redo"});
  EXPECT_EQ(r.type, "run.rerun_requested");
  EXPECT_EQ(r.data, nlohmann::json::parse(
                        R"({"from_phase":"research","revision":3,"by":"operator:bob",
                            "feedback":"redo"})"));
  EXPECT_OK(ValidateEvent(r));
}

TEST(Events, EmptyOptionalFieldsAreLeftOut) {
  Event c = RunCreatedEvent(kRun, {.workflow = "w",
                                   .workflow_version = 1,
                                   .workflow_digest = kDigest,
                                   .inputs_digest = kDigest});
  EXPECT_FALSE(c.data.contains("idempotency_key"));
  EXPECT_FALSE(RunPausedEvent(kRun, {.step_path = "g"}).data.contains("proposal_digest"));
  Event f = RunFinishedEvent(kRun, {.status = RunStatus::kCompleted});
  EXPECT_EQ(f.data, nlohmann::json::parse(R"({"status":"completed"})"));
  EXPECT_FALSE(StepFailedEvent(kRun, {.path = "a", .step_id = "a", .error = "e"})
                   .data.contains("retry_in_ms"));
  EXPECT_EQ(StepStartedEvent(kRun, {.path = "a", .step_id = "a", .kind = "k"}).data,
            nlohmann::json::parse(R"({"path":"a","step_id":"a","kind":"k","attempt":1})"));
  Event d = RunDecidedEvent(
      kRun,
      {.step_path = "g", .decision = "reject", .reviewer = "alice", .proposal_digest = kDigest});
  EXPECT_EQ(d.data, nlohmann::json::parse(R"({"step_path":"g","decision":"reject",
      "reviewer":"alice","proposal_digest":")" +
                                          kDigest + R"(","revision":1})"));
  Event r = RunRerunRequestedEvent(kRun, {.from_phase = "write", .revision = 2, .by = "bob"});
  EXPECT_EQ(r.data, nlohmann::json::parse(R"({"from_phase":"write","revision":2,"by":"bob"})"));
}

TEST(Events, RunDecidedChecksDecisionReviewerDigestAndRevision) {
  RunDecidedData good{
      .step_path = "gate", .decision = "approve", .reviewer = "alice", .proposal_digest = kDigest};
  for (std::string_view decision : kDecisions) {
    RunDecidedData d = good;
    d.decision = std::string(decision);
    EXPECT_OK(ValidateEvent(RunDecidedEvent(kRun, d))) << decision;
  }
  struct Case {
    const char* name;
    std::function<void(RunDecidedData&)> mutate;
    const char* message_part;
  };
  const std::vector<Case> cases = {
      {"unknown decision", [](RunDecidedData& d) { d.decision = "maybe"; },
       "data.decision must be one of approve|edit|reject|request_revision"},
      {"no decision", [](RunDecidedData& d) { d.decision = ""; }, "data.decision must be one of"},
      {"no reviewer", [](RunDecidedData& d) { d.reviewer = ""; },
       "data.reviewer must not be empty"},
      {"no step_path", [](RunDecidedData& d) { d.step_path = ""; },
       "data.step_path must not be empty"},
      {"no digest", [](RunDecidedData& d) { d.proposal_digest = ""; },
       "data.proposal_digest must be \"sha256:\""},
      {"short digest", [](RunDecidedData& d) { d.proposal_digest = "sha256:abc"; },
       "data.proposal_digest must be"},
      {"revision 0", [](RunDecidedData& d) { d.revision = 0; }, "data.revision must be >= 1"},
  };
  for (const Case& c : cases) {
    RunDecidedData d = good;
    c.mutate(d);
    absl::Status s = ValidateEvent(RunDecidedEvent(kRun, d));
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument)) << c.name;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message_part)) << c.name;
  }
  Event e = RunDecidedEvent(kRun, good);
  e.data["feedback"] = "";
  EXPECT_THAT(ValidateEvent(e), StatusIs(absl::StatusCode::kInvalidArgument));
  e.data.erase("feedback");
  e.data.erase("revision");
  EXPECT_THAT(ValidateEvent(e).message(), HasSubstr("data.revision is required"));
}

TEST(Events, RunRerunRequestedChecksPhaseRevisionAndBy) {
  RunRerunRequestedData good{.from_phase = "research", .revision = 2, .by = "bob"};
  EXPECT_OK(ValidateEvent(RunRerunRequestedEvent(kRun, good)));
  RunRerunRequestedData d = good;
  d.from_phase = "";
  EXPECT_THAT(std::string(ValidateEvent(RunRerunRequestedEvent(kRun, d)).message()),
              HasSubstr("data.from_phase must not be empty"));
  d = good;
  d.revision = 0;
  EXPECT_THAT(std::string(ValidateEvent(RunRerunRequestedEvent(kRun, d)).message()),
              HasSubstr("data.revision must be >= 1"));
  d = good;
  d.by = "";
  EXPECT_THAT(std::string(ValidateEvent(RunRerunRequestedEvent(kRun, d)).message()),
              HasSubstr("data.by must not be empty"));
  Event e = RunRerunRequestedEvent(kRun, good);
  e.data["rerun_from"] = "x";
  EXPECT_THAT(std::string(ValidateEvent(e).message()),
              HasSubstr("data.rerun_from is not a field of run.rerun_requested"));
}

TEST(Events, StepStartedRevisionAndEntryAreOptionalButChecked) {
  for (RunEntry entry :
       {RunEntry::kFresh, RunEntry::kResume, RunEntry::kRerun, RunEntry::kRevision}) {
    Event e = StepStartedEvent(
        kRun, {.path = "a", .step_id = "a", .kind = "exec", .revision = 2, .entry = entry});
    EXPECT_EQ(e.data["entry"], ToString(entry));
    EXPECT_OK(ValidateEvent(e));
    e.seq = 4;
    e.at = absl::FromUnixMicros(1'795'988'700'123'456);
    absl::StatusOr<Event> back = EventFromJson(EventToJson(e));
    ASSERT_OK(back);
    ExpectSameEvent(*back, e);
  }
  // Either may appear without the other.
  Event only_revision =
      StepStartedEvent(kRun, {.path = "a", .step_id = "a", .kind = "exec", .revision = 1});
  EXPECT_FALSE(only_revision.data.contains("entry"));
  EXPECT_OK(ValidateEvent(only_revision));
  Event only_entry = StepStartedEvent(
      kRun, {.path = "a", .step_id = "a", .kind = "exec", .entry = RunEntry::kResume});
  EXPECT_FALSE(only_entry.data.contains("revision"));
  EXPECT_OK(ValidateEvent(only_entry));

  Event e = StepStartedEvent(kRun, {.path = "a", .step_id = "a", .kind = "exec"});
  e.data["revision"] = 0;
  EXPECT_THAT(std::string(ValidateEvent(e).message()), HasSubstr("data.revision must be >= 1"));
  e.data["revision"] = -1;
  EXPECT_THAT(std::string(ValidateEvent(e).message()), HasSubstr("data.revision must be >= 1"));
  e.data["revision"] = "2";
  EXPECT_THAT(std::string(ValidateEvent(e).message()),
              HasSubstr("data.revision must be an integer"));
  e.data.erase("revision");
  e.data["entry"] = "restart";
  EXPECT_THAT(std::string(ValidateEvent(e).message()),
              HasSubstr("data.entry must be one of fresh|resume|rerun|revision"));
  e.data["entry"] = nullptr;
  EXPECT_THAT(ValidateEvent(e), StatusIs(absl::StatusCode::kInvalidArgument));
  e.data["entry"] = "";
  EXPECT_THAT(ValidateEvent(e), StatusIs(absl::StatusCode::kInvalidArgument));
}

// The executor names the lease it takes (the store adds nothing): an event
// without its owner, or with attempt 0, is refused.
TEST(Events, RunStartedNamesTheLeasesAttemptAndOwner) {
  Event e = RunStartedEvent(kRun, {.attempt = 0, .revision = 1});
  EXPECT_EQ(e.data["attempt"], 0);
  EXPECT_EQ(e.data["lease_owner"], "");
  EXPECT_THAT(ValidateEvent(e), StatusIs(absl::StatusCode::kInvalidArgument));
  e.data["attempt"] = 1;
  e.data["lease_owner"] = "worker-1";
  EXPECT_OK(ValidateEvent(e));
}

TEST(Events, RunFinishedRejectsANonTerminalStatus) {
  absl::Status s = ValidateEvent(RunFinishedEvent(kRun, {.status = RunStatus::kRunning}));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("data.status"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("running"));
  for (RunStatus st : {RunStatus::kCompleted, RunStatus::kRejected, RunStatus::kUnresolved,
                       RunStatus::kBudgetStopped, RunStatus::kFailed, RunStatus::kCancelled}) {
    EXPECT_OK(ValidateEvent(RunFinishedEvent(kRun, {.status = st})));
  }
}

TEST(Events, SamplesCoverEveryTypeAndAreValid) {
  std::vector<Event> samples = SampleEvents();
  std::set<std::string> seen;
  int64_t last_seq = 0;
  absl::Time last_at = absl::InfinitePast();
  for (const Event& e : samples) {
    seen.insert(e.type);
    EXPECT_OK(ValidateEvent(e));
    EXPECT_GT(e.seq, last_seq);
    EXPECT_GT(e.at, last_at);
    last_seq = e.seq;
    last_at = e.at;
    absl::StatusOr<Event> back = EventFromJson(EventToJson(e));
    ASSERT_OK(back);
    ExpectSameEvent(*back, e);
  }
  std::vector<std::string> all = AllEventTypes();
  EXPECT_EQ(seen, std::set<std::string>(all.begin(), all.end()));
  // Deterministic, so a failure in tests/events is reproducible.
  ASSERT_EQ(SampleEvents().size(), samples.size());
  EXPECT_EQ(EventToJson(SampleEvents().back()), EventToJson(samples.back()));
}

TEST(EventTime, FormatsUtcMicrosecondsAndParsesRfc3339) {
  absl::Time t = absl::FromUnixMicros(1'795'988'700'123'456);
  EXPECT_EQ(FormatEventTime(t), "2026-11-29T21:45:00.123456Z");
  EXPECT_EQ(FormatEventTime(t + absl::Nanoseconds(999)), "2026-11-29T21:45:00.123456Z");
  EXPECT_EQ(FormatEventTime(absl::FromUnixSeconds(0)), "1970-01-01T00:00:00.000000Z");
  EXPECT_THAT(ParseEventTime("2026-11-29T21:45:00.123456Z"), ::runloom::testing::IsOkAndHolds(t));
  EXPECT_THAT(ParseEventTime("2026-11-29T22:45:00.123456+01:00"),
              ::runloom::testing::IsOkAndHolds(t));
  EXPECT_THAT(ParseEventTime("2026-11-29 21:45:00Z"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseEventTime(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Enums, RoundTripAndMatchTheFieldTable) {
  std::vector<std::string> entries;
  for (RunEntry e : {RunEntry::kFresh, RunEntry::kResume, RunEntry::kRerun, RunEntry::kRevision}) {
    EXPECT_EQ(ParseRunEntry(ToString(e)), e);
    entries.emplace_back(ToString(e));
  }
  EXPECT_EQ(ParseRunEntry("Fresh"), std::nullopt);
  std::vector<std::string> classes;
  for (ErrorClass c : kAllErrorClasses) {
    EXPECT_EQ(ParseErrorClass(ToString(c)), c);
    if (c != ErrorClass::kSkipped) {  // a step record's class, never step.failed's
      classes.emplace_back(ToString(c));
    }
  }
  EXPECT_EQ(ParseErrorClass(""), std::nullopt);
  EXPECT_EQ(ParseErrorClass("Error"), std::nullopt);

  std::vector<std::string> terminal;
  for (RunStatus s : {RunStatus::kQueued, RunStatus::kRunning, RunStatus::kPaused,
                      RunStatus::kCompleted, RunStatus::kRejected, RunStatus::kUnresolved,
                      RunStatus::kBudgetStopped, RunStatus::kFailed, RunStatus::kCancelled}) {
    if (IsTerminal(s)) {
      terminal.emplace_back(ToString(s));
    }
  }
  auto one_of = [](std::string_view type, std::string_view field) {
    for (const auto& f : events_internal::FindEventSpec(type)->fields) {
      if (f.name == field) {
        return f.one_of;
      }
    }
    return std::vector<std::string>{};
  };
  EXPECT_EQ(one_of("run.started", "entry"), entries);
  EXPECT_EQ(one_of("step.started", "entry"), entries);
  EXPECT_EQ(one_of("step.failed", "error_class"), classes);
  EXPECT_EQ(one_of("run.finished", "status"), terminal);
  EXPECT_EQ(one_of("run.decided", "decision"),
            std::vector<std::string>(std::begin(kDecisions), std::end(kDecisions)));
}

// --- Rejections -------------------------------------------------------------

nlohmann::json GoodEnvelope() {
  Event e = StepFailedEvent(kRun, {.path = "a",
                                   .step_id = "a",
                                   .attempt = 1,
                                   .error = "boom",
                                   .will_retry = true,
                                   .retry_in_ms = 10});
  e.seq = 7;
  e.at = absl::FromUnixSeconds(1'795'988'700);
  return EventToJson(e);
}

TEST(EventFromJson, AcceptsTheGoodEnvelope) { EXPECT_OK(EventFromJson(GoodEnvelope())); }

struct BadCase {
  const char* name;
  std::function<void(nlohmann::json&)> mutate;
  const char* message_part;
};

TEST(EventFromJson, RejectsBrokenEnvelopesAndData) {
  const std::vector<BadCase> cases = {
      {"array", [](nlohmann::json& j) { j = nlohmann::json::array(); }, "JSON object"},
      {"missing at", [](nlohmann::json& j) { j.erase("at"); }, "\"at\" is missing"},
      {"extra key", [](nlohmann::json& j) { j["lease"] = 1; }, "unexpected key \"lease\""},
      {"run_id number", [](nlohmann::json& j) { j["run_id"] = 5; }, "run_id must be a string"},
      {"empty run_id", [](nlohmann::json& j) { j["run_id"] = ""; }, "run_id is empty"},
      {"negative seq", [](nlohmann::json& j) { j["seq"] = -1; }, "seq must be"},
      {"float seq", [](nlohmann::json& j) { j["seq"] = 1.5; }, "seq must be"},
      {"string seq", [](nlohmann::json& j) { j["seq"] = "7"; }, "seq must be"},
      {"version 0", [](nlohmann::json& j) { j["schema_version"] = 0; }, "schema_version"},
      {"version 2", [](nlohmann::json& j) { j["schema_version"] = 2; }, "schema_version 2"},
      {"bad at", [](nlohmann::json& j) { j["at"] = "yesterday"; }, "RFC 3339"},
      {"unknown type", [](nlohmann::json& j) { j["type"] = "step.exploded"; },
       "unknown event type"},
      {"data array", [](nlohmann::json& j) { j["data"] = nlohmann::json::array(); },
       "data must be a JSON object"},
      {"missing field", [](nlohmann::json& j) { j["data"].erase("error"); },
       "data.error is required"},
      {"extra field", [](nlohmann::json& j) { j["data"]["stderr"] = "x"; },
       "data.stderr is not a field of step.failed"},
      {"bad enum", [](nlohmann::json& j) { j["data"]["error_class"] = "skipped"; },
       "data.error_class must be one of"},
      {"attempt 0", [](nlohmann::json& j) { j["data"]["attempt"] = 0; },
       "data.attempt must be >= 1"},
      {"attempt string", [](nlohmann::json& j) { j["data"]["attempt"] = "1"; },
       "data.attempt must be an integer"},
      {"attempt float", [](nlohmann::json& j) { j["data"]["attempt"] = 1.0; },
       "data.attempt must be an integer"},
      {"retry negative", [](nlohmann::json& j) { j["data"]["retry_in_ms"] = -5; },
       "data.retry_in_ms must be >= 0"},
      {"will_retry int", [](nlohmann::json& j) { j["data"]["will_retry"] = 1; },
       "data.will_retry must be true or false"},
      {"empty path", [](nlohmann::json& j) { j["data"]["path"] = ""; },
       "data.path must not be empty"},
      {"null optional", [](nlohmann::json& j) { j["data"]["retry_in_ms"] = nullptr; },
       "data.retry_in_ms must be an integer"},
  };
  for (const BadCase& c : cases) {
    nlohmann::json j = GoodEnvelope();
    c.mutate(j);
    absl::StatusOr<Event> e = EventFromJson(j);
    EXPECT_THAT(e, StatusIs(absl::StatusCode::kInvalidArgument)) << c.name;
    EXPECT_THAT(std::string(e.status().message()), HasSubstr(c.message_part)) << c.name;
  }
}

TEST(EventFromJson, RejectsBadDigestsAndEmptyOptionalStrings) {
  Event c = RunCreatedEvent(kRun, {.workflow = "w",
                                   .workflow_version = 1,
                                   .workflow_digest = "sha256:ABC",
                                   .inputs_digest = kDigest});
  EXPECT_THAT(ValidateEvent(c), StatusIs(absl::StatusCode::kInvalidArgument));
  c.data["workflow_digest"] = "sha256:" + std::string(64, 'F');
  EXPECT_THAT(ValidateEvent(c), StatusIs(absl::StatusCode::kInvalidArgument));
  c.data["workflow_digest"] = kDigest;
  EXPECT_OK(ValidateEvent(c));
  c.data["idempotency_key"] = "";
  EXPECT_THAT(ValidateEvent(c), StatusIs(absl::StatusCode::kInvalidArgument));
  c.data.erase("idempotency_key");
  c.data["entry"] = "resume";  // run.created is always fresh
  EXPECT_THAT(ValidateEvent(c), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ParseEventJson, RejectsMalformedText) {
  EXPECT_THAT(ParseEventJson("{\"run_id\": "), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseEventJson(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(ParseEventJson(GoodEnvelope().dump()));
}

// --- The JSON Schemas agree with the field table ---------------------------

nlohmann::json LoadJson(const std::filesystem::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  if (!in.good()) {
    return nullptr;
  }
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

const std::filesystem::path kSchemas = RUNLOOM_EVENT_SCHEMAS_DIR;

TEST(Schemas, OneSchemaAndOneFixturePerType) {
  std::set<std::string> schemas;
  for (const auto& entry : std::filesystem::directory_iterator(kSchemas)) {
    std::string name = entry.path().filename().string();
    const std::string suffix = ".schema.json";
    if (name.size() > suffix.size() && name.ends_with(suffix) && name != "envelope.schema.json") {
      schemas.insert(name.substr(0, name.size() - suffix.size()));
    }
  }
  std::vector<std::string> all = AllEventTypes();
  EXPECT_EQ(schemas, std::set<std::string>(all.begin(), all.end()));
  for (const std::string& t : all) {
    nlohmann::json fixture = LoadJson(kSchemas / "fixtures" / (t + ".json"));
    absl::StatusOr<Event> e = EventFromJson(fixture);
    EXPECT_OK(e) << "fixture " << t;
    if (e.ok()) {
      EXPECT_EQ(e->type, t);
    }
  }
  nlohmann::json envelope = LoadJson(kSchemas / "envelope.schema.json");
  EXPECT_EQ(envelope["properties"]["type"]["enum"], nlohmann::json(all));
}

// std::regex trips GCC 12's -Wmaybe-uninitialized under -O1 (the Asan build),
// so the schema's patterns are pinned here and checked by hand.
bool MatchesRunIdPattern(const std::string& id) {
  const std::string kCrockford = "0123456789abcdefghjkmnpqrstvwxyz";
  if (id.size() != 24 || id.rfind("r_", 0) != 0) {
    return false;
  }
  return id.find_first_not_of(kCrockford, 2) == std::string::npos;
}

TEST(Schemas, RunIdAndTimePatternsMatchWhatWeWrite) {
  nlohmann::json envelope = LoadJson(kSchemas / "envelope.schema.json");
  EXPECT_EQ(envelope["properties"]["run_id"]["pattern"], "^r_[0-9abcdefghjkmnpqrstvwxyz]{22}$");
  EXPECT_EQ(envelope["properties"]["at"]["pattern"],
            "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$");
  absl::InsecureBitGen gen;
  for (int i = 0; i < 20; ++i) {
    std::string id = NewRunId(absl::FromUnixSeconds(1'795'988'700 + i * 1'000'003), gen);
    EXPECT_TRUE(MatchesRunIdPattern(id)) << id;
  }
  EXPECT_FALSE(MatchesRunIdPattern("r_0000000000000000000001u"));
  // The `at` pattern: fixed width, six fraction digits, "Z".
  for (absl::Time t : {absl::FromUnixMicros(5), absl::FromUnixMicros(1'795'988'700'123'456),
                       absl::FromUnixSeconds(4'102'444'799)}) {
    std::string s = FormatEventTime(t);
    EXPECT_EQ(s.size(), 27u) << s;
    EXPECT_EQ(s[10], 'T') << s;
    EXPECT_EQ(s[19], '.') << s;
    EXPECT_EQ(s.back(), 'Z') << s;
  }
}

// Compares one data property of a type schema with its FieldSpec.
void ExpectFieldMatches(const std::string& type, const events_internal::FieldSpec& f,
                        const nlohmann::json& prop) {
  using events_internal::FieldKind;
  SCOPED_TRACE(type + " data." + std::string(f.name));
  ASSERT_TRUE(prop.is_object());
  switch (f.kind) {
    case FieldKind::kString:
      EXPECT_EQ(prop.value("type", ""), "string");
      if (f.one_of.empty()) {
        EXPECT_EQ(prop.value("minLength", 0), static_cast<int>(f.min_length));
      } else if (prop.contains("const")) {
        EXPECT_EQ(nlohmann::json::array({prop["const"]}), nlohmann::json(f.one_of));
      } else {
        EXPECT_EQ(prop["enum"], nlohmann::json(f.one_of));
      }
      break;
    case FieldKind::kDigest:
      EXPECT_EQ(prop.value("type", ""), "string");
      EXPECT_EQ(prop.value("pattern", ""), "^sha256:[0-9a-f]{64}$");
      break;
    case FieldKind::kInteger:
      EXPECT_EQ(prop.value("type", ""), "integer");
      ASSERT_TRUE(f.minimum.has_value());
      EXPECT_EQ(prop.value("minimum", int64_t{-1}), *f.minimum);
      break;
    case FieldKind::kBoolean:
      EXPECT_EQ(prop.value("type", ""), "boolean");
      break;
  }
}

TEST(Schemas, TypeSchemasMatchTheFieldTable) {
  for (const events_internal::EventSpec& spec : events_internal::EventSpecs()) {
    const std::string type(spec.type);
    SCOPED_TRACE(type);
    nlohmann::json schema = LoadJson(kSchemas / (type + ".schema.json"));
    ASSERT_TRUE(schema.is_object());
    const nlohmann::json& props = schema["properties"];
    EXPECT_EQ(props["type"]["const"], type);
    EXPECT_EQ(props["schema_version"]["const"], spec.schema_version);
    const nlohmann::json& data = props["data"];
    EXPECT_EQ(data["additionalProperties"], false);
    std::set<std::string> required;
    std::set<std::string> all;
    for (const auto& f : spec.fields) {
      all.emplace(f.name);
      if (f.required) {
        required.emplace(f.name);
      }
      ASSERT_TRUE(data["properties"].contains(std::string(f.name))) << f.name;
      ExpectFieldMatches(type, f, data["properties"][std::string(f.name)]);
    }
    EXPECT_EQ(data["required"].get<std::set<std::string>>(), required);
    std::set<std::string> schema_fields;
    for (const auto& [key, value] : data["properties"].items()) {
      schema_fields.insert(key);
    }
    EXPECT_EQ(schema_fields, all);
  }
}

TEST(Events, LlmCallChecksOutcomeAndCounts) {
  LlmCallData d{.path = "ask",
                .model = "writer",
                .provider = "local",
                .outcome = "ok",
                .input_tokens = 12,
                .output_tokens = 3,
                .cost_micros = 9,
                .latency_ms = 40};
  EXPECT_OK(ValidateEvent(LlmCallEvent(kRun, d)));
  EXPECT_FALSE(LlmCallEvent(kRun, d).data.contains("error_class"));
  LlmCallData bad = d;
  bad.outcome = "maybe";
  EXPECT_THAT(ValidateEvent(LlmCallEvent(kRun, bad)), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = d;
  bad.cost_micros = -1;
  EXPECT_THAT(ValidateEvent(LlmCallEvent(kRun, bad)), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = d;
  bad.provider.clear();
  EXPECT_THAT(ValidateEvent(LlmCallEvent(kRun, bad)), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace runloom
