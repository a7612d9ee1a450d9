// Step kinds: what a step of a given `kind:` does when it runs.
//
// The engine resolves a step's templates, then calls StepKind::Execute with
// the resolved config and a StepContext. A step reports failure through the
// returned Status; its code decides the error class a retry policy sees:
//   kDeadlineExceeded -> timeout, kUnavailable -> unavailable,
//   kResourceExhausted -> rate_limited, kInvalidArgument -> invalid (retried
//   only when the step's retry.on lists it), kCancelled -> the run was cancelled or the lease lost
//   (not a step failure), anything else -> error.
//
// Built-in kinds: exec, noop, sleep, fail, llm, http. An embedding program adds its
// own with StepRegistry::Register before opening the engine.
//
// Thread-safety: a StepKind's Execute may be called from many threads at once
// for different steps; implementations must be thread-safe. StepRegistry is
// thread-safe.
#pragma once

#include "runloom/budget_ledger.h"
#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/mutex.h"
#include "runloom/run.h"
#include "runloom/trace.h"
#include "runloom/write_ledger.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runloom {

struct StepDef;

// The error class of a step's status, by the table above (kCancelled ->
// kCancelled).
ErrorClass ErrorClassOf(const absl::Status& s);

// What a running step may ask of the engine.
class StepContext {
 public:
  virtual ~StepContext() = default;
  virtual const std::string& run_id() const = 0;
  virtual const std::string& step_path() const = 0;
  virtual int attempt() const = 0;  // 1 on the first try
  // Directory relative paths are resolved against: the directory of the
  // workflow file the run was started from; "" = the process's cwd.
  virtual const std::string& working_dir() const = 0;
  virtual Clock* clock() = 0;
  // The step's deadline (its timeout); InfiniteFuture when it has none.
  virtual absl::Time deadline() const = 0;
  // True once the step must stop: run cancelled, lease lost, engine stopping.
  virtual bool Stopping() = 0;
  // Sleeps until `until`, returning early (false) when Stopping() turns true.
  virtual bool SleepUntil(absl::Time until) = 0;
  // Registers a callback run (on another thread) when Stopping() turns true,
  // e.g. to kill a subprocess. Replaces any earlier callback; nullptr clears.
  virtual void OnStop(std::function<void()> fn) = 0;
  // Adds an event of this attempt (e.g. llm.call), built by a factory of
  // runloom/events.h (LlmCallEvent and the others; the run_id argument may be
  // "": the engine fills it in). It is written with the
  // attempt's step.succeeded or step.failed event, in the same transaction,
  // whether the attempt succeeds or fails; an attempt that is stopped (run
  // cancelled, lease lost) is not recorded, and neither are its events.
  virtual void RecordEvent(Event event) = 0;

  // ---- external writes and secrets (the engine implements these; a
  // context of one's own may leave them: they answer kUnimplemented) ----
  //
  // The decision this step's writes carry out (WriteKey::decision, "" =
  // none): the nearest approval gate before the step, as decided. Part of
  // every write's key and Idempotency-Key (DeriveIdempotencyKey), so a new
  // decision may write again and the same decision never writes twice.
  virtual const std::string& write_decision() const {
    static const std::string kNone;
    return kNone;
  }
  // Records the intent of this step's write `action` in the run's
  // write_operations ledger, fenced by the run's lease (Store::BeginWrite
  // with this run, this step's path and the lease token), before anything
  // is sent. kAborted: the lease is lost (send nothing; the step stops).
  virtual absl::StatusOr<BeginWriteResult> BeginWrite(const std::string& /*action*/,
                                                      const std::string& /*idempotency_key*/,
                                                      const std::string& /*request_digest*/) {
    return absl::UnimplementedError("this step context keeps no write ledger");
  }
  // Records the result of this step's write `action` (Store::FinishWrite),
  // with every secret value the execution knows scrubbed from it.
  virtual absl::StatusOr<WriteOperation> FinishWrite(const std::string& /*action*/,
                                                     const WriteResult& /*result*/) {
    return absl::UnimplementedError("this step context keeps no write ledger");
  }
  // The value of the secret reference secret://`name`, resolved as for a
  // secret input (RUNLOOM_SECRET_<NAME>, RUNLOOM_SECRETS_FILE) and scrubbed
  // from everything the execution writes from then on. kNotFound says how
  // to provide it.
  virtual absl::StatusOr<std::string> ResolveSecret(const std::string& /*name*/) {
    return absl::UnimplementedError("this step context resolves no secrets");
  }
  // ---- budgets (budget_ledger.h; the engine implements these, a context
  // of one's own may leave them: kUnimplemented, and the call is not
  // budgeted) ----
  //
  // Reserves `amount_micros` (a model call's worst case) from the run's and
  // its tenant's budgets for this attempt, before the call is sent
  // (Store::Reserve, fenced by the run's lease). Not granted: the call must
  // not be sent; the engine has already stopped the run, which ends
  // budget_stopped with the figures. kAborted: the lease is lost.
  virtual absl::StatusOr<ReserveResult> ReserveBudget(int64_t /*amount_micros*/) {
    return absl::UnimplementedError("this step context keeps no budget");
  }
  // Books the real cost of the call reserved by ReserveBudget
  // (Store::SettleReservation). kFailedPrecondition when nothing was
  // reserved.
  virtual absl::Status SettleBudget(int64_t /*cost_micros*/) {
    return absl::UnimplementedError("this step context keeps no budget");
  }

  // ---- Streaming (issue 24: a step's reply reaching watchers as it
  // arrives; the defaults drop it) ----
  //
  // A piece of the text the step is receiving now (a streamed model reply),
  // forwarded to the run's live subscribers, not stored; the step's output
  // keeps the whole text. Called on the step's thread.
  virtual void StreamDelta(std::string_view /*text*/) {}
  // The text streamed so far in this attempt is void (the provider sends
  // the request again).
  virtual void StreamReset() {}

  // ---- Traces (issue 25, runloom/trace.h; the defaults trace nothing) ----
  //
  // The step attempt's span, the parent of the spans the step records and
  // what its outbound requests carry as `traceparent`; nullopt = untraced.
  virtual std::optional<TraceContext> trace() const { return std::nullopt; }
  // Reports a span of the step's own work (a model call, an http request),
  // a child of trace(). Its error message must hold no secret.
  virtual void RecordSpan(TraceSpan /*span*/) {}

  // Where the step logs (never null).
  virtual Logger* logger() { return DefaultLogger(); }
};

// The result of one successful execution.
struct StepOutput {
  nlohmann::json output = nlohmann::json::object();
  std::string stderr_tail;  // kept in the step record (at most 4 KiB)
};

class StepKind {
 public:
  virtual ~StepKind() = default;
  // Checks the step's static config (templates unresolved). kInvalidArgument
  // with a message saying what to change; the caller adds file and line.
  virtual absl::Status Validate(const StepDef& def) const = 0;
  // Runs the step once. `config` has every template resolved.
  virtual absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) = 0;
  // The timeout of one attempt of a step of this kind that sets none (no
  // `timeout:` and no `defaults.timeout`); InfiniteDuration = the kind ends
  // by itself (noop, fail, sleep). Every step is bounded: a step past it is
  // stopped (an exec's process group killed) and its retry policy sees
  // `timeout`. EngineOptions::step_timeouts overrides it per kind.
  virtual absl::Duration DefaultTimeout() const { return kDefaultStepTimeout; }

  // A registered kind's default (exec's too): one hour.
  static constexpr absl::Duration kDefaultStepTimeout = absl::Hours(1);
};

class StepRegistry {
 public:
  StepRegistry() = default;
  StepRegistry(const StepRegistry&) = delete;
  StepRegistry& operator=(const StepRegistry&) = delete;

  // Adds or replaces the kind `name`. "loop" and "parallel" are reserved.
  void Register(const std::string& name, std::shared_ptr<StepKind> kind);
  // nullptr when unknown.
  std::shared_ptr<StepKind> Find(const std::string& name) const;
  // The registered kinds' names, sorted (the engine pre-creates a metric
  // series per kind at Open).
  std::vector<std::string> Names() const;
  // A registry holding the built-in kinds (exec, noop, sleep, fail, llm, http);
  // defined in runloom::steps_http, which links libcurl.
  static std::unique_ptr<StepRegistry> WithBuiltins();
  // The built-in kinds that need no network library: exec, noop, sleep,
  // fail, and llm on the fake provider (runloom::steps). The engine's default.
  static std::unique_ptr<StepRegistry> WithLocalBuiltins();

 private:
  mutable runloom::Mutex mu_;
  std::map<std::string, std::shared_ptr<StepKind>> kinds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom
