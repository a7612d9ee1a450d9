#include "events/samples.h"

#include "runloom/events.h"

#include "core/digest.h"

#include <string>

namespace runloom {
namespace {

// A fixed run id in NewRunId's shape ("r_" + 22 Crockford base32 chars).
constexpr char kSampleRunId[] = "r_01kc0d7rzq3m5x8v2n4p6t";
// 2026-11-29T21:45:00.123456Z; event number n is at this plus n milliseconds.
constexpr int64_t kSampleStartMicros = 1'795'988'700'123'456;

}  // namespace

std::vector<Event> SampleEvents() {
  const std::string run = kSampleRunId;
  const std::string workflow_digest = JsonDigest(nlohmann::json{{"name", "review"}});
  const std::string inputs_digest = JsonDigest(nlohmann::json{{"topic", "events"}});
  const std::string proposal_digest = JsonDigest(nlohmann::json{{"proposal", 1}});
  std::vector<Event> out = {
      RunCreatedEvent(run, {.workflow = "review",
                            .workflow_version = 3,
                            .workflow_digest = workflow_digest,
                            .inputs_digest = inputs_digest,
                            .idempotency_key = "nightly-2026-11-29"}),
      RunCreatedEvent(run, {.workflow = "review",
                            .workflow_version = 1,
                            .workflow_digest = workflow_digest,
                            .inputs_digest = inputs_digest}),
      RunCreatedEvent(run, {.workflow = "summarize",
                            .workflow_version = 2,
                            .workflow_digest = workflow_digest,
                            .inputs_digest = inputs_digest,
                            .idempotency_key = "child:r_06f1q2w3e4r5t6y7v8x9ab:1:summarize#1",
                            .parent_run_id = "r_06f1q2w3e4r5t6y7v8x9ab"}),
      RunStartedEvent(
          run,
          {.attempt = 1, .lease_owner = "worker-a:4242", .revision = 1, .entry = RunEntry::kFresh}),
      StepStartedEvent(run, {.path = "draft",
                             .step_id = "draft",
                             .kind = "llm",
                             .attempt = 1,
                             .phase = "write",
                             .revision = 1,
                             .entry = RunEntry::kFresh}),
      StepFailedEvent(run, {.path = "draft",
                            .step_id = "draft",
                            .attempt = 1,
                            .error = "provider returned 503",
                            .error_class = ErrorClass::kUnavailable,
                            .will_retry = true,
                            .retry_in_ms = 2000}),
      StepStartedEvent(run, {.path = "draft", .step_id = "draft", .kind = "llm", .attempt = 2}),
      StepSucceededEvent(run,
                         {.path = "draft", .step_id = "draft", .attempt = 2, .duration_ms = 1532}),
      StepSkippedEvent(run, {.path = "refine[1]/polish",
                             .step_id = "polish",
                             .reason = "when: steps.draft.output.ok == true is false"}),
      RunLeaseExpiredEvent(run, {.attempt = 1, .lease_owner = "worker-a:4242"}),
      RunDeadLetteredEvent(run, {.message_id = "17",
                                 .deliveries = 10,
                                 .reason = "delivered 10 times without an ack (the cap is 10)"}),
      RunStartedEvent(
          run,
          {.attempt = 2, .lease_owner = "worker-b:77", .revision = 1, .entry = RunEntry::kResume}),
      StepReusedEvent(run, {.path = "draft", .step_id = "draft"}),
      RunPausedEvent(run, {.step_path = "approve", .proposal_digest = proposal_digest}),
      RunPausedEvent(run, {.step_path = "approve"}),
      RunWaitingEvent(run, {.step_path = "nap", .until = "2026-11-29T21:50:05.123456Z"}),
      RunWaitingEvent(run, {.step_path = "await_payment",
                            .for_what = "signal",
                            .until = "2026-12-02T21:45:05.123456Z",
                            .signal = "payment"}),
      RunWaitingEvent(run, {.step_path = "await_approval", .for_what = "signal", .signal = "go"}),
      RunWaitingEvent(run, {.step_path = "summarize",
                            .for_what = "child",
                            .child_run_id = "r_06f1q2w3e4r5a1b2c3d4e5"}),
      RunDecidedEvent(run, {.step_path = "approve",
                            .decision = "request_revision",
                            .reviewer = "alice",
                            .proposal_digest = proposal_digest,
                            .feedback = "cite the 2025 numbers",
                            .rerun_from = "research",
                            .revision = 2}),
      RunDecidedEvent(run, {.step_path = "approve",
                            .decision = "approve",
                            .reviewer = "alice",
                            .proposal_digest = proposal_digest,
                            .revision = 2}),
      RunResumedEvent(run, {.reason = "approved by alice"}),
      [&] {
        Event e = SignalReceivedEvent(
            run, {.name = "payment", .idempotency_key = "pay-7731", .by = "operator:bob"});
        e.data["seq"] = 1;
        e.data["resolved"] = true;
        return e;
      }(),
      [&] {
        Event e = SignalReceivedEvent(run, {.name = "payment"});
        e.data["seq"] = 2;
        e.data["resolved"] = false;
        return e;
      }(),
      StepFailedEvent(run, {.path = "publish",
                            .step_id = "publish",
                            .attempt = 3,
                            .error = "exit status 2",
                            .error_class = ErrorClass::kError,
                            .will_retry = false}),
      RunReleasedEvent(run, {.reason = "worker shutting down"}),
      RunRerunRequestedEvent(run, {.from_phase = "research",
                                   .revision = 3,
                                   .by = "operator:bob",
                                   .feedback = "sources changed"}),
      RunRerunRequestedEvent(run, {.from_phase = "write", .revision = 4, .by = "operator:bob"}),
      RunCancelRequestedEvent(run, {.by = "operator:bob"}),
      RunFinishedEvent(run, {.status = RunStatus::kFailed,
                             .outcome = "failed",
                             .error = "step publish failed: exit status 2"}),
      RunFinishedEvent(run, {.status = RunStatus::kCancelled}),
      LlmCallEvent(run, {.path = "draft",
                         .attempt = 1,
                         .model = "writer",
                         .provider = "local",
                         .provider_model = "qwen2.5-7b-instruct",
                         .outcome = "ok",
                         .input_tokens = 412,
                         .output_tokens = 230,
                         .cost_micros = 551,
                         .latency_ms = 1830,
                         .requests = 2}),
      LlmCallEvent(run, {.path = "draft",
                         .attempt = 2,
                         .model = "fake",
                         .provider = "fake",
                         .outcome = "invalid",
                         .error_class = ErrorClass::kInvalid,
                         .input_tokens = 12,
                         .output_tokens = 9,
                         .requests = 1}),
  };
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].seq = static_cast<int64_t>(i) + 1;
    out[i].at = absl::FromUnixMicros(kSampleStartMicros) + absl::Milliseconds(out[i].seq);
  }
  return out;
}

}  // namespace runloom
