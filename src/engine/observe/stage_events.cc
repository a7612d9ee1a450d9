#include "engine/observe/stage_events.h"

#include "runloom/status.h"

#include "core/log.h"
#include "core/status_macros.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace runloom::engine_internal {
namespace {

constexpr absl::Duration kFirstBackoff = absl::Seconds(1);
constexpr absl::Duration kMaxBackoff = absl::Seconds(30);

}  // namespace

std::optional<std::string> StageIdValue(const nlohmann::json& inputs, const std::string& name) {
  auto it = inputs.find(name);
  if (it == inputs.end()) return std::nullopt;
  if (it->is_string() && !it->get<std::string>().empty()) return it->get<std::string>();
  if (it->is_number_integer()) return it->dump();
  return std::nullopt;
}

StageUpdate TerminalStageUpdate(RunStatus status, const std::string& error) {
  if (status == RunStatus::kCompleted) return {"completed", "succeeded", ""};
  return {"failed", "failed",
          error.empty() ? absl::StrCat("run ", std::string(ToString(status))) : error};
}

std::string StageTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

nlohmann::json StageEventPayload(const StageEvent& e) {
  nlohmann::json out = {{"correlation_id", e.correlation_id},
                        {"document_id", e.document_id},
                        {"tenant_id", e.tenant_id},
                        {"node_id", e.node_id},
                        {"stage", e.update.stage},
                        {"status", e.update.status},
                        {"timestamp", StageTimestamp(e.at)}};
  if (!e.update.error.empty()) out["error"] = e.update.error;
  return out;
}

absl::StatusOr<std::unique_ptr<StageEventPublisher>> StageEventPublisher::Create(
    const StageEventOptions& options, Clock* clock, Logger* logger) {
  if (options.publisher == nullptr) {
    return absl::InvalidArgumentError(
        "stage events: StageEventOptions::publisher is null (leave stage events off, or pass "
        "one: redis::NewRedisPublisher in runloom::redis)");
  }
  if (options.channel_prefix.empty()) {
    return absl::InvalidArgumentError(
        "stage events: channel_prefix is empty; leave it at \"pipeline\" or name one");
  }
  return std::unique_ptr<StageEventPublisher>(new StageEventPublisher(options, clock, logger));
}

StageEventPublisher::StageEventPublisher(const StageEventOptions& options, Clock* clock,
                                         Logger* logger)
    : prefix_(options.channel_prefix),
      clock_(clock),
      logger_(logger),
      publisher_(options.publisher),
      backoff_(kFirstBackoff) {}

void StageEventPublisher::Publish(const RunRecord& run, const Workflow& wf,
                                  const StageUpdate& update) {
  if (!wf.stage_events) return;
  const StageEventsDef& ids = *wf.stage_events;
  const std::string what = absl::StrCat("stage events: run ", run.id, ": ", update.stage, "/",
                                        update.status, " not published");
  std::optional<std::string> tenant = StageIdValue(run.inputs, ids.tenant_id);
  std::optional<std::string> node = StageIdValue(run.inputs, ids.node_id);
  if (!tenant || !node) {
    const std::string& missing = !tenant ? ids.tenant_id : ids.node_id;
    // An error (reference 004's I/O matrix: "Publisher logs ERROR, returns"):
    // the workflow promised these ids and the run lacks one.
    Log(logger_, LogLevel::kError, {.run_id = run.id}, what, ": input '", missing, "' (",
        !tenant ? "tenant_id" : "node_id",
        ") is missing or empty; start the run with it to route its events");
    return;
  }
  StageEvent e{.correlation_id = run.id,
               .document_id = StageIdValue(run.inputs, ids.document_id).value_or(""),
               .tenant_id = *tenant,
               .node_id = *node,
               .update = update,
               .at = clock_->Now()};
  const std::string channel = absl::StrCat(prefix_, ":", *tenant, ":", *node);
  absl::Status s = Send(channel, StageEventPayload(e).dump());
  if (!s.ok()) {
    Log(logger_, LogLevel::kWarning, {.run_id = run.id}, what, " to ", channel, ": ", s.ToString());
  }
}

absl::Status StageEventPublisher::Send(const std::string& channel, const std::string& payload) {
  runloom::MutexLock l(&mu_);
  const absl::Time now = clock_->Now();
  if (!publisher_->connected() && now < retry_at_) {
    return absl::UnavailableError(
        absl::StrCat("publisher down; next connect attempt in ",
                     absl::FormatDuration(absl::Ceil(retry_at_ - now, absl::Milliseconds(1))),
                     "; last error: ", last_error_.message()));
  }
  absl::Status s = publisher_->Publish(channel, payload);
  if (!s.ok() && !publisher_->connected()) {
    // Broken or unreachable: no connect attempt until the backoff passes.
    retry_at_ = now + backoff_;
    backoff_ = std::min(backoff_ * 2, kMaxBackoff);
    last_error_ = s;
    return s;
  }
  backoff_ = kFirstBackoff;
  return s;
}

}  // namespace runloom::engine_internal
