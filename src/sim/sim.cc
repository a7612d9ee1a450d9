// RunSimulation (sim.h): the seeded choice of a world, its workload, its
// clients and faults, and the invariant checker. Over 40-line functions
// here are the workload's YAML and the checker's fold, each one list of
// cases.
#include "sim/sim.h"

#include "runloom/engine.h"
#include "runloom/events.h"
#include "runloom/mutex.h"
#include "runloom/sqlite.h"
#include "runloom/status.h"
#include "runloom/trace.h"

#include "core/log.h"
#include "core/status_macros.h"
#include "engine/engine_driver.h"
#include "engine/rules/child_signal.h"
#include "engine/rules/run_context.h"
#include "engine/rules/step_counts.h"
#include "engine/run/child_run.h"
#include "engine/service/retention_sweep.h"
#include "llm/cap_board.h"
#include "llm/concurrency_controller.h"
#include "llm/fake_provider.h"
#include "llm/provider.h"
#include "steps/builtin_steps.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "schedule/cron.h"
#include "schedule/fire_time.h"
#include "sim/faults.h"
#include "sim/world.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runloom::sim {
namespace {

// "p2.1" -> process 2, life 1; false for any other name.
bool SplitLifeName(const std::string& name, int* process, int* gen) {
  if (name.size() < 4 || name[0] != 'p') return false;
  const size_t dot = name.find('.');
  return dot != std::string::npos &&
         absl::SimpleAtoi(absl::string_view(name).substr(1, dot - 1), process) &&
         absl::SimpleAtoi(absl::string_view(name).substr(dot + 1), gen);
}

using engine_internal::EngineDriver;

template <typename T>
std::string Name(const T& v) {
  return std::string(ToString(v));
}

// What one seed chose.
struct Params {
  int processes = 2;
  int executors = 1;  // per process
  // Runs each process holds at once (issue 27, EngineOptions::runs_in_flight:
  // a run waiting on a model call, a sleep or a backoff gives its executor
  // back, so a process holds more runs than it has executors). In the
  // simulation every held run is a slot claiming and executing one run at a
  // time; its waits interleave through the world's timers, as a fiber's
  // suspensions interleave on an executor. At least `executors`.
  int runs_in_flight = 1;
  absl::Duration ttl;
  absl::Duration sweep_interval;
  absl::Duration queued_grace;
  absl::Duration visibility;
  absl::Duration idle_poll = absl::Milliseconds(200);
  int max_attempts = 5;  // every generated workflow's `max_attempts:` (issue 28)
  int workflows = 2;
  int max_runs = 4;
  FaultRates rates;
  double crash = 0;  // chance that a fault tick crashes a process
};

// A generated workflow: its YAML, its phases, and the longest it can take
// with every retry (for the liveness bound).
struct Workload {
  std::string name;
  std::string yaml;
  std::vector<std::string> phases;
  absl::Duration worst;
  Workflow wf;
  // Stage events (reference 004): the workflow has a `stage_events:` block,
  // and the stages its steps name.
  bool staged = false;
  std::set<std::string> stages;
  // Waits for a signal (issue 23): step id -> the signal it waits for, and
  // the names the workflow's waits use.
  std::map<std::string, std::string> waits;
  std::vector<std::string> signals;
  int max_attempts = 5;  // its `max_attempts:`, the attempt cap stored on its runs
  // Its `concurrency:` limit (issue 23; 0 = none): the key is its own name
  // and the run's tenant, so every run of one key has this limit.
  int concurrency_limit = 0;
  int priority = 0;  // its `priority:`
};

std::string Ms(absl::Duration d) { return absl::StrCat(absl::ToInt64Milliseconds(d), "ms"); }

// Bounded steps (issue 25): a step of kind `hang` never ends by itself; its
// kind's default timeout, which its workflow does not override, must stop
// each attempt.
constexpr absl::Duration kHangTimeout = absl::Milliseconds(400);
constexpr char kHangSuffix[] = "hang";  // its step ids end so

class HangingKind final : public StepKind {
 public:
  absl::Status Validate(const StepDef&) const override { return absl::OkStatus(); }
  absl::Duration DefaultTimeout() const override { return kHangTimeout; }
  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json&) override {
    // Only the deadline (or a stop) ends it. Past 10 simulated minutes
    // unstopped it gives up, as an error the checker flags: a wait with no
    // end would run the world's clock into its 6 h cap, which aborts.
    if (!ctx.SleepUntil(ctx.clock()->Now() + absl::Minutes(10))) {
      return absl::CancelledError("hang: stopped");
    }
    return absl::InternalError("hang: 10 min and nothing stopped it: no timeout bounds it");
  }
};

// `keys` draws issue 23's choices (concurrency, priorities) apart from the
// world's generator, so a seed whose workloads have no key keeps the
// history it had before keys existed.
Workload MakeWorkload(Rng& rng, Rng& keys, int index, int max_attempts) {
  Workload w;
  w.name = absl::StrCat("sim", index);
  w.max_attempts = max_attempts;
  std::string steps;
  const int n = 2 + static_cast<int>(rng.Below(4));
  bool gate = false;
  std::string gate_id;  // the gate's step id, once generated
  w.staged = rng.Chance(0.5);
  for (int i = 1; i <= n; ++i) {
    const std::string id = absl::StrCat("s", i);
    const std::string phase = absl::StrCat("p", i);
    w.phases.push_back(phase);
    const std::string head = absl::StrCat("  - id: ", id, "\n    phase: ", phase, "\n");
    const uint64_t kind = rng.Below(8);
    // A leaf step of a staged workflow may name the stage it enters, or the
    // stage its start and its success enter (`stage: [pending, processing]`).
    std::string stage;
    if (w.staged && kind != 2 && kind != 3 && kind != 6 && kind != 7 && rng.Chance(0.6)) {
      // Reference 004's vocabulary (workflow-yaml.md, "Stage events").
      static constexpr const char* kStages[] = {"pending", "processing", "parsing", "chunking",
                                                "indexing"};
      if (rng.Chance(0.3)) {
        stage = "    stage: [pending, processing]\n";
        w.stages.insert({"pending", "processing"});
      } else {
        const char* one = kStages[rng.Below(std::size(kStages))];
        stage = absl::StrCat("    stage: ", one, "\n");
        w.stages.insert(one);
      }
    }
    switch (kind) {
      case 0: {  // work that takes time: the lease must be renewed under it
        const absl::Duration d = rng.Millis(50, 1500);
        absl::StrAppend(&steps, head, "    kind: sleep\n    duration: ", Ms(d), "\n");
        w.worst += d;
        break;
      }
      case 1: {  // fails its first attempts, then succeeds (or fails the run)
        const int times = static_cast<int>(rng.Below(3));
        if (times == 2) {
          // And before it, a step that hangs (issue 25), with no timeout of
          // its own: each of its two attempts ends at its kind's default.
          // No draw of its own, so the other seeds' workloads stay as they were.
          absl::StrAppend(&steps, "  - id: ", id, kHangSuffix, "\n    phase: ", phase,
                          "\n    kind: hang\n    allow_failure: true\n"
                          "    retry: {max_attempts: 2, initial_delay: 100ms, on: [timeout]}\n");
          w.worst += 2 * kHangTimeout + absl::Milliseconds(300);
        }
        absl::StrAppend(&steps, head, "    kind: fail\n    times: ", times,
                        "\n    class: unavailable\n"
                        "    retry: {max_attempts: 2, initial_delay: 100ms, on: [unavailable]}\n");
        w.worst += absl::Milliseconds(300);
        break;
      }
      case 2: {  // parallel branches with a deadline, one of them failing
        const absl::Duration deadline = rng.Millis(300, 1200);
        absl::StrAppend(&steps, head, "    kind: parallel\n    deadline: ", Ms(deadline),
                        "\n    branches:\n");
        const int branches = 2 + static_cast<int>(rng.Below(2));
        for (int b = 0; b < branches; ++b) {
          const std::string bid = absl::StrCat(id, "b", b);
          absl::StrAppend(&steps, "      - name: b", b, "\n        steps:\n          - id: ", bid,
                          "\n");
          if (b == 1 && rng.Chance(0.6)) {
            absl::StrAppend(&steps, "            kind: fail\n            message: branch error\n");
          } else {
            absl::StrAppend(&steps, "            kind: sleep\n            duration: ",
                            Ms(rng.Millis(20, 1500)), "\n");
          }
        }
        w.worst += deadline;
        break;
      }
      case 3: {  // an approval gate (one per workflow)
        if (gate) {
          absl::StrAppend(&steps, head, "    kind: noop\n");
          break;
        }
        gate = true;
        gate_id = id;
        absl::StrAppend(&steps, head,
                        "    kind: approval\n    title: simulated review\n"
                        "    proposal: {action: restart, step: ",
                        id, "}\n    allow: [approve, reject]\n");
        break;
      }
      case 4: {  // a priced model call under the run's and tenant's budgets; 429s first
        if (i % 2 == 0) {
          // An agent (issue 24): two priced turns, the first calling two tools
          // (one sleeps, so they run one after the other), then an answer.
          // No draw of its own, so the other seeds' workloads stay as they were.
          absl::StrAppend(
              &steps, head, "    kind: agent\n    model: priced\n    prompt: \"agent ", i,
              " of {{ inputs.tenant }}: a b c\"\n    max_turns: 3\n",
              "    fake:\n      latency: 50ms\n      turns:\n",
              "        - tool_calls: [{name: nap, arguments: {d: 80ms}}, "
              "{name: note, arguments: {text: seen}}]\n",
              "        - text: done\n",
              "    retry: {max_attempts: 3, initial_delay: 100ms, on: [rate_limited, unavailable]}\n",
              "    tools:\n",
              "      - {name: nap, description: Waits., parameters: {type: object, properties: "
              "{d: {type: string}}, required: [d]}, step: {kind: sleep, duration: \"{{ args.d "
              "}}\"}}\n",
              "      - {name: note, description: Notes., parameters: {type: object}, step: "
              "{kind: noop, output: {note: \"{{ args.text }}\"}}}\n");
          w.worst += absl::Seconds(3);
          break;
        }
        absl::StrAppend(&steps, head, "    kind: llm\n    model: priced\n    prompt: \"step ", i,
                        " of {{ inputs.tenant }}: a b c d e f\"\n    fake: {latency: ",
                        Ms(rng.Millis(20, 800)), ", rate_limit_times: ", rng.Below(3),
                        "}\n    retry: {max_attempts: 3, initial_delay: 100ms, "
                        "on: [rate_limited, unavailable]}\n");
        w.worst += absl::Seconds(3);
        break;
      }
      case 6: {  // a loop: a body run again until a condition, up to a bound
        const int max = 1 + static_cast<int>(rng.Below(3));
        const int until = 1 + static_cast<int>(rng.Below(static_cast<uint64_t>(max) + 1));
        const absl::Duration d = rng.Millis(20, 600);
        absl::StrAppend(
            &steps, "  - id: ", id, "\n    phase: ", phase,
            "\n    kind: loop\n    max_iterations: ", max,
            // `until` past max: the loop runs out its iterations.
            "\n    until: 'loop.iteration == ", until, "'\n    body:\n      - id: ", id,
            "w\n        kind: sleep\n        duration: ", Ms(d), "\n      - id: ", id,
            "f\n        kind: fail\n        times: ", rng.Below(2),
            "\n        class: unavailable\n"
            "        retry: {max_attempts: 2, initial_delay: 100ms, on: [unavailable]}\n");
        w.worst += max * (d + absl::Milliseconds(300));
        break;
      }
      case 7: {  // a wait for a signal, with a timeout or none; two waits may share a name
        const std::string signal = absl::StrCat("sig", rng.Below(2));
        absl::StrAppend(&steps, head, "    kind: wait\n    signal: ", signal, "\n");
        if (rng.Chance(0.6)) {
          const absl::Duration timeout = rng.Millis(300, 4000);
          absl::StrAppend(&steps, "    timeout: ", Ms(timeout), "\n");
          w.worst += timeout;
        }
        w.waits[id] = signal;
        if (std::find(w.signals.begin(), w.signals.end(), signal) == w.signals.end()) {
          w.signals.push_back(signal);
        }
        break;
      }
      default: {  // an external write, once in effect
        absl::StrAppend(&steps, head,
                        "    kind: http\n    method: POST\n    url: http://sim.invalid/actions\n"
                        "    write: true\n    action: act",
                        i, "\n    body: {step: ", id,
                        // After a gate the body names its reviewer, as triage's
                        // does: a rerun approved by another reviewer sends
                        // another request, under its decision's key.
                        gate_id.empty()
                            ? std::string()
                            : absl::StrCat(", by: \"{{ steps.", gate_id, ".output.reviewer }}\""),
                        "}\n    expect: [201]\n"
                        "    lookup: {url: http://sim.invalid/actions/lookup}\n"
                        "    retry: {max_attempts: 4, initial_delay: 100ms, on: [unavailable]}\n");
        w.worst += absl::Seconds(2);
        break;
      }
    }
    steps += stage;  // a key of the step just written (the last at its indent)
  }
  // Half the workloads cap their runs per tenant (issue 23): a run over the
  // limit must stay queued without a lease or an attempt, and start when a
  // slot frees, through every fault.
  std::string concurrency;
  if (keys.Chance(0.5)) {
    w.concurrency_limit = 1 + static_cast<int>(keys.Below(2));
    w.priority = static_cast<int>(keys.Below(kMaxPriority + 1));
    concurrency = absl::StrCat("concurrency: {key: \"", w.name, "-{{ inputs.tenant }}\", limit: ",
                               w.concurrency_limit, "}\npriority: ", w.priority, "\n");
  }
  w.yaml = absl::StrCat(
      "name: ", w.name, "\ndescription: simulated\ntenant: tenant\nmax_attempts: ", w.max_attempts,
      "\n", concurrency, w.staged ? "stage_events: {document_id: doc, tenant_id: tenant, node_id: node}\n" : "",
      "inputs:\n  tenant: {type: string, default: t1}\n  doc: {type: string, default: d1}\n"
      "  node: {type: string, default: n1}\nsteps:\n",
      steps);
  return w;
}

// The model provider's side of the books: every answered call is paid for,
// whatever becomes of its settle, so its cost is charged to the tenant named
// in its prompt ("step N of TENANT: ...", MakeWorkload) the moment it answers.
// A call its caller stopped mid-flight (a cancel, a lost lease, the step's
// deadline) was sent, and a real provider may bill it all the same (the
// kill campaign's did: its answer was written, then nobody read it): it is
// charged what the whole answer could cost (the prompt's tokens and
// max_tokens), and its failure says so as the http provider's does
// (kLlmMaybeBilledPayload).
// The invariant: what a tenant was charged never exceeds its spent plus
// reserved figures (and so, with them, never its limit).
class ChargingProvider final : public LlmProvider {
 public:
  ChargingProvider(std::shared_ptr<LlmProvider> inner, ModelRoute prices)
      : inner_(std::move(inner)), prices_(std::move(prices)) {}

  absl::Status ValidateOptions(const nlohmann::json& options) const override {
    return inner_->ValidateOptions(options);
  }
  absl::StatusOr<LlmResponse> Complete(StepContext& ctx, const LlmRequest& request) override {
    absl::StatusOr<LlmResponse> r = inner_->Complete(ctx, request);
    if (r.ok()) charged_[TenantOf(request.prompt)] += CostMicros(prices_, r->usage);
    if (absl::IsCancelled(r.status()) && ctx.Stopping()) {
      const LlmUsage whole{.prompt_tokens = CountTokens(request.prompt),
                           .completion_tokens = request.max_tokens.value_or(0)};
      charged_[TenantOf(request.prompt)] += CostMicros(prices_, whole);
      return WithMaybeBilled(r.status(), 1);
    }
    return r;
  }
  const std::map<std::string, int64_t>& charged() const { return charged_; }

 private:
  static std::string TenantOf(std::string_view prompt) {
    const size_t of = prompt.find(" of ");
    if (of == std::string_view::npos) return "";
    const size_t colon = prompt.find(':', of);
    return std::string(prompt.substr(of + 4, colon == std::string_view::npos ? 0 : colon - of - 4));
  }

  std::shared_ptr<LlmProvider> inner_;
  ModelRoute prices_;
  std::map<std::string, int64_t> charged_;  // tenant -> micros the provider charged
};

// The engines' spans (issue 25, runloom/trace.h), checked by Sim::CheckSpans:
// every process's engine exports here.
class SpanCollector final : public SpanSink {
 public:
  void Export(TraceSpan span) override {
    runloom::MutexLock l(&mu_);
    pending_.push_back(std::move(span));
  }
  std::vector<TraceSpan> Take() {
    runloom::MutexLock l(&mu_);
    return std::exchange(pending_, {});
  }

 private:
  runloom::Mutex mu_;
  std::vector<TraceSpan> pending_ ABSL_GUARDED_BY(mu_);
};

// One simulated process: its lives, each an engine over the shared backend.
struct Process {
  int id = 0;
  std::shared_ptr<Incarnation> inc;
  std::vector<std::unique_ptr<Clock>> clocks;  // every life's, kept until the end
  std::vector<std::unique_ptr<Engine>> engines;
  // Every life's LLM cap controller and its way to the board (issue 22.2).
  std::vector<std::unique_ptr<FaultCapBoard>> cap_boards;
  std::vector<std::unique_ptr<ConcurrencyController>> controllers;
  std::vector<std::shared_ptr<Incarnation>> controller_lives;  // whose each is
  // Every sweeping life's retention sweep, over a store of its own (after
  // `engines`; each sweep before its store, so destroyed first).
  std::vector<std::unique_ptr<FaultStore>> retention_stores;
  std::vector<std::unique_ptr<engine_internal::RetentionSweep>> retentions;
  std::unique_ptr<std::mt19937_64> random;
  bool sweeper = true;
};

// Retention in the simulation (issue 25): finished runs older than this go,
// in batches of two, while the seed runs (world time: a seed lasts tens of
// seconds), and a run with a write row younger than the audit horizon stays.
constexpr absl::Duration kSimKeepRuns = absl::Seconds(8);
constexpr absl::Duration kSimAuditHorizon = absl::Seconds(12);
constexpr absl::Duration kSimRetentionPass = absl::Seconds(1);

class Sim {
 public:
  explicit Sim(const SimOptions& options) : options_(options), world_(options.seed) {}

  SimResult Run();

 private:
  void Choose();
  absl::Status Open();
  std::unique_ptr<Engine> NewEngine(Process& p, bool injects);
  void StartLife(Process& p);
  // `body` now and then every `period` while `inc` lives.
  void Every(const std::shared_ptr<Incarnation>& inc, absl::Duration first, absl::Duration period,
             std::function<void()> body);
  void Act(const std::shared_ptr<Incarnation>& inc, const std::function<void()>& body);
  void ClientTick();
  void FaultTick();
  void Decide(const std::string& run_id);
  // Sends one of the run's workflow's signals (and now and then the same
  // again under its idempotency key, as a sender whose reply was lost).
  void SendSignal(const RunRecord& run, const Workload& w);
  // The mailbox against the client's sends, the wait steps' records and
  // the run's status: each wait resolved once, signals consumed in order.
  void CheckSignals(const RunRecord& run, const std::vector<StepRecord>& steps, const Workload& w);
  const Workload* WorkloadOf(const std::string& workflow) const;
  // At rest: finished, paused at a gate, or waiting for a signal with no
  // timeout (only a signal, which the clients no longer send, moves it).
  static bool Rests(const RunRecord& run);
  void Check();
  void CheckRun(const RunRecord& run);
  void CheckHangEvent(const RunRecord& run, const Event& e,
                      std::map<std::string, absl::Time>& started);
  // Concurrency keys (issue 23): never more runs of a key running than its
  // limit, in one snapshot of the store.
  void CheckConcurrency();
  // Every span once; a run span only for a terminal revision, once; each
  // step span under its revision's run span, in its run's one trace.
  void CheckSpans();
  void CheckEnd();
  // A stage event as it is published, against the store at that moment.
  void CheckStageEvent(const std::string& who, const std::string& channel,
                       const std::string& payload);
  // One tick of a process's LLM cap controller, with the calls it saw.
  void CapTick(ConcurrencyController& c);
  // After the faults: one controller decides and a fresh cap is published.
  void CheckCapEnd();
  bool AllRest();
  absl::Duration LivenessBound() const;
  // Schedules (issue 23), in a third of the seeds: the client creates one
  // on workload 0 firing every few seconds; the sweeping processes fire it;
  // when the faults stop it is paused and its runs join the checked ones.
  void CreateSchedule();
  void StopSchedule();
  // Each schedule run's key names a tick of its cron expression, no tick
  // has two runs, and no more runs than ticks came while it was active.
  void CheckSchedule();
  // Child runs (issue 23), in a third of the seeds: workload 0 ends with a
  // `run` step of the workflow `simchild` (its own generator: the world's
  // draws stay). AddChildStep writes both; JoinChildren adds the children
  // of the checked runs to them (each must rest like a client's run);
  // CheckChildren holds one child per parent step and no orphan at rest,
  // and each parent's run step's record against its child.
  void AddChildStep();
  void JoinChildren();
  void CheckChildren();
  // Retention: whether run `id`, which a read did not find (`gone`), was
  // deleted by retention: the checker saw it finished last (any other
  // absence is a violation, reported here). Once so, it stays pruned and
  // the checks skip it.
  bool Pruned(const std::string& id, const absl::Status& gone);
  bool IsPruned(const std::string& id) const { return pruned_.contains(id); }

  const SimOptions options_;
  World world_;
  Params params_;
  Rng keys_rng_{options_.seed ^ 0x6b657973ULL};  // issue 23's draws (MakeWorkload)
  // Issue 27's draw (runs held per process): a generator of its own, so the
  // seeds that hold no more runs than executors keep their histories.
  Rng held_rng_{options_.seed ^ 0x68656c64ULL};
  FaultState faults_;
  Backend base_;
  std::unique_ptr<SimService> service_;
  std::shared_ptr<ChargingProvider> provider_;
  // Spans (CheckSpans): those not yet checked, and what the checked ones
  // showed: each run's trace, the span ids seen, the run spans by run and
  // revision (their status).
  SpanCollector spans_;
  std::map<std::string, std::string> trace_of_;
  std::set<std::string> span_ids_;
  std::map<std::pair<std::string, int64_t>, std::string> run_span_status_;
  int64_t spans_checked_ = 0;
  std::shared_ptr<StepRegistry> registry_;
  // The LLM cap board every process shares (the Redis of a deployment), on
  // world time, and the checker's record of its protocol.
  std::unique_ptr<CapBoard> cap_board_;
  CapLedger cap_ledger_;
  ConcurrencyOptions cap_options_;
  std::vector<Workload> workloads_;
  std::optional<Workload> child_workload_;  // `simchild`, when the seed has child runs
  std::string child_step_;                  // the run step's id in workload 0
  int children_ = 0;                        // child runs joined to runs_
  std::shared_ptr<Incarnation> client_inc_;
  Process client_proc_;  // the clients' process: the API, never faulted
  std::unique_ptr<Engine> client_;
  std::vector<std::unique_ptr<Process>> processes_;
  bool clients_on_ = true;
  std::vector<std::string> runs_;
  // The schedule of this seed, if any (ScheduleRequest::id "" = none), and
  // when it was created and paused (world time).
  ScheduleRequest schedule_;
  absl::Time schedule_from_;
  absl::Time schedule_until_;
  int schedule_runs_ = 0;
  int crashes_ = 0;
  // Runs each life executes at once now (keyed by its Incarnation), the most
  // any life held, and the crashes of a life holding more than executors.
  std::map<const Incarnation*, int> held_;
  int most_held_ = 0;
  int crashes_holding_many_ = 0;
  int stage_events_ = 0;
  // The checker's memory: finished step records as first seen, and which
  // digests were current when a decision was sent.
  std::map<std::string, std::string> records_;
  std::map<std::string, int> reviews_;  // run id -> pauses the client decided on
  std::map<std::string, int> counted_;  // "run/revision" -> step counts' total last seen
  // Signals the clients sent and the store kept: run id -> seq -> (name, payload).
  std::map<std::string, std::map<int64_t, std::pair<std::string, nlohmann::json>>> sent_;
  int signals_sent_ = 0;
  int64_t checked_at_ = -1;             // FaultState::calls_returned at the last check
  // Retention: each checked run as the checker last read it, and the runs
  // retention deleted (each seen finished before it went).
  std::map<std::string, RunRecord> last_seen_;
  std::set<std::string> pruned_;
};

void Sim::Choose() {
  Rng& rng = world_.rng();
  params_.processes = 2 + static_cast<int>(rng.Below(2));
  params_.executors = 1 + static_cast<int>(rng.Below(2));
  params_.runs_in_flight = held_rng_.Chance(0.5)
                               ? params_.executors
                               : params_.executors + 1 + static_cast<int>(held_rng_.Below(4));
  params_.ttl = rng.Millis(1500, 4000);
  params_.sweep_interval = rng.Millis(200, 1000);
  params_.queued_grace = rng.Millis(1000, 3000);
  params_.visibility = rng.Millis(2000, 6000);
  params_.max_attempts = 3 + static_cast<int>(rng.Below(4));
  params_.workflows = 1 + static_cast<int>(rng.Below(3));
  params_.max_runs = 2 + static_cast<int>(rng.Below(5));
  FaultRates& r = params_.rates;
  r.store_fail = 0.02 * static_cast<double>(rng.Below(3));
  r.lost_reply = 0.02 * static_cast<double>(rng.Below(3));
  r.slow = 0.1 * static_cast<double>(rng.Below(4));
  r.stop = 0.004 * static_cast<double>(rng.Below(3));
  r.stop_for = params_.ttl + rng.Millis(100, 2000);
  r.message_lost = 0.05 * static_cast<double>(rng.Below(3));
  r.message_duplicated = 0.1 * static_cast<double>(rng.Below(3));
  r.message_delayed = 0.1 * static_cast<double>(rng.Below(2));
  r.answer_dropped = 0.15 * static_cast<double>(rng.Below(3));
  params_.crash = 0.2 * static_cast<double>(rng.Below(3));
  faults_.rates = r;
  world_.Record(absl::StrCat(
      "seed ", options_.seed, ": ", params_.processes, " processes x ", params_.executors,
      " executors, lease ttl ", Ms(params_.ttl), ", sweep ", Ms(params_.sweep_interval),
      ", queued grace ", Ms(params_.queued_grace), ", visibility ", Ms(params_.visibility),
      ", max attempts ", params_.max_attempts, ", up to ", params_.max_runs, " runs",
      params_.runs_in_flight > params_.executors
          ? absl::StrCat(", ", params_.runs_in_flight, " runs in flight")
          : std::string()));
}

absl::Status Sim::Open() {
  SqliteOptions so;
  so.clock = world_.clock();
  so.watch_other_processes = false;
  RUNLOOM_ASSIGN_OR_RETURN(base_, OpenSqlite(":memory:", so));
  service_ = std::make_unique<SimService>(&world_, &faults_);
  registry_ = StepRegistry::WithLocalBuiltins();
  registry_->Register("hang", std::make_shared<HangingKind>());
  // A priced model on the fake provider: every call reserves its worst case
  // and settles its cost (docs/operations.md "Budgets").
  auto providers = std::make_shared<LlmProviderRegistry>();
  ModelRoute priced{.provider = NewFakeLlmProvider(),
                    .provider_name = "fake",
                    .model = "priced",
                    .input_micros_per_1k = 1000,
                    .output_micros_per_1k = 1000,
                    .max_tokens = 64};
  provider_ = std::make_shared<ChargingProvider>(priced.provider, priced);
  priced.provider = provider_;
  providers->RegisterModel("priced", std::move(priced));
  registry_->Register("llm", NewLlmStep(providers, nullptr));
  for (const char* tenant : {"t1", "t2"}) {
    const int64_t limit = 200 + static_cast<int64_t>(world_.rng().Below(1800));
    RUNLOOM_RETURN_IF_ERROR(base_.store->SetTenantBudget(tenant, limit).status());
    world_.Record(absl::StrCat("tenant ", tenant, " budget ", limit, " micros"));
  }
  registry_->Register("http",
                      steps_internal::NewHttpStepWith(
                          [this](const steps_internal::Exchange& e) { return service_->Send(e); }));
  client_inc_ = std::make_shared<Incarnation>(Incarnation{.process = 0, .name = "client"});
  client_proc_.inc = client_inc_;
  client_proc_.random = std::make_unique<std::mt19937_64>(world_.rng().Next());
  client_ = NewEngine(client_proc_, /*injects=*/false);
  if (client_ == nullptr) return absl::InternalError("the client's engine did not open");
  for (int i = 0; i < params_.workflows; ++i) {
    Workload w = MakeWorkload(world_.rng(), keys_rng_, i, params_.max_attempts);
    absl::StatusOr<Workflow> wf = LoadWorkflowYaml(w.yaml, absl::StrCat(w.name, ".yaml"));
    if (!wf.ok()) {
      return absl::InternalError(
          absl::StrCat("workload ", i, ": ", wf.status().message(), "\n", w.yaml));
    }
    w.wf = *wf;
    world_.Record(absl::StrCat("workflow ", w.name, ":\n", w.yaml));
    workloads_.push_back(std::move(w));
  }
  AddChildStep();
  CreateSchedule();
  cap_board_ = NewInProcessCapBoard(world_.clock());
  cap_options_ = ConcurrencyOptions{.static_cap = 8, .max_cap = 64};
  cap_ledger_.lease = cap_options_.lease;
  cap_ledger_.max_cap = cap_options_.max_cap;
  for (int i = 1; i <= params_.processes; ++i) {
    auto p = std::make_unique<Process>();
    p->id = i;
    p->random = std::make_unique<std::mt19937_64>(world_.rng().Next());
    p->sweeper = i <= 2;  // not every process sweeps
    processes_.push_back(std::move(p));
    StartLife(*processes_.back());
  }
  return absl::OkStatus();
}

std::unique_ptr<Engine> Sim::NewEngine(Process& p, bool injects) {
  p.clocks.push_back(world_.ProcessClock(p.inc));
  EngineOptions o;
  o.env.clock = p.clocks.back().get();
  o.env.logger = NullLogger();
  o.env.random = absl::BitGenRef(*p.random);
  o.env.scheduler = world_.scheduler();
  o.env.spans = &spans_;
  o.owner = p.inc->name;
  // Restart recovery (issue 27), as the engine's /proc check decides it:
  // the lives of one simulated process are one host's processes one after
  // another, so a later life proves an earlier one dead; another process is
  // another host, whose holders are never provably dead.
  o.holder_is_dead = [inc = p.inc](const std::string& owner) {
    int process = 0;
    int gen = 0;
    return SplitLifeName(owner, &process, &gen) && process == inc->process && gen < inc->gen;
  };
  o.executors = params_.executors;
  o.runs_in_flight = params_.runs_in_flight;
  o.batch_scheduling = false;
  o.lease_ttl = params_.ttl;
  o.queued_grace = params_.queued_grace;
  o.sweep_interval = params_.sweep_interval;
  o.visibility_timeout = params_.visibility;
  o.idle_poll = params_.idle_poll;
  // Sleeps of 1 s and more park their runs (the sweeper wakes them).
  o.park_sleeps_over = absl::Seconds(1);
  o.drain_timeout = absl::ZeroDuration();
  o.registry = registry_;
  o.stage_events.publisher = std::make_shared<SimPublisher>(
      &world_, &faults_, p.inc,
      [this](const std::string& who, const std::string& channel, const std::string& payload) {
        CheckStageEvent(who, channel, payload);
      });
  Backend b;
  b.events = base_.events;
  b.store = std::make_unique<FaultStore>(base_.store.get(), &world_, &faults_, p.inc, injects);
  b.transport = std::make_unique<FaultTransport>(base_.transport.get(), &world_, &faults_, p.inc);
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Open(std::move(o), std::move(b));
  if (!e.ok()) {
    world_.Violate(absl::StrCat("Engine::Open: ", e.status().ToString()));
    return nullptr;
  }
  return *std::move(e);
}

void Sim::Act(const std::shared_ptr<Incarnation>& inc, const std::function<void()>& body) {
  world_.Push(inc);
  body();
  world_.Pop();
}

void Sim::Every(const std::shared_ptr<Incarnation>& inc, absl::Duration first,
                absl::Duration period, std::function<void()> body) {
  world_.At(world_.now() + first, inc, [this, inc, period, body] {
    Act(inc, body);
    Check();  // after every firing, nested ones too
    Every(inc, period, period, body);
  });
}

void Sim::StartLife(Process& p) {
  const int gen = p.inc == nullptr ? 0 : p.inc->gen + 1;
  Rng& rng = world_.rng();
  p.inc = std::make_shared<Incarnation>(
      Incarnation{.process = p.id,
                  .gen = gen,
                  .name = absl::StrCat("p", p.id, ".", gen),
                  .skew = absl::Milliseconds(static_cast<int64_t>(rng.Below(801)) - 400)});
  world_.Register(p.inc);
  p.engines.push_back(NewEngine(p, /*injects=*/true));
  Engine* engine = p.engines.back().get();
  if (engine == nullptr) return;
  std::shared_ptr<Incarnation> inc = p.inc;
  world_.Record(
      absl::StrCat(world_.Stamp(), " ", inc->name, " starts (clock skew ", Ms(inc->skew), ")"));
  for (int slot = 0; slot < params_.runs_in_flight; ++slot) {
    Every(inc, rng.Millis(0, 200), params_.idle_poll, [this, engine, inc, slot] {
      int& held = held_[inc.get()];  // (std::map: stays valid while others are added)
      most_held_ = std::max(most_held_, ++held);
      absl::StatusOr<EngineDriver::Executed> r =
          EngineDriver::ExecuteNext(*engine, params_.visibility);
      --held;
      if (!r.ok()) {
        world_.Record(absl::StrCat(world_.Stamp(), " ", inc->name, "/", slot,
                                   " claim: ", r.status().message()));
      } else if (!r->run_id.empty()) {
        world_.Record(absl::StrCat(world_.Stamp(), " ", inc->name, "/", slot, " executed ",
                                   r->run_id, ": ",
                                   r->status.ok() ? "ok" : std::string(r->status.message())));
      }
    });
  }
  Every(inc, rng.Millis(0, 300), params_.ttl / 3, [engine] { EngineDriver::RenewLeases(*engine); });
  // The LLM cap controller of this life: it reports to the shared board and
  // decides while it holds the lease.
  p.cap_boards.push_back(
      std::make_unique<FaultCapBoard>(cap_board_.get(), &world_, &faults_, inc, &cap_ledger_));
  FaultCapBoard* board = p.cap_boards.back().get();
  p.controllers.push_back(std::make_unique<ConcurrencyController>(
      "fake", cap_options_,
      ControllerDeps{.clock = p.clocks.back().get(),
                     .logger = NullLogger(),
                     .board = std::shared_ptr<CapBoard>(std::shared_ptr<CapBoard>(), board),
                     .id = inc->name}));
  p.controller_lives.push_back(inc);
  ConcurrencyController* controller = p.controllers.back().get();
  Every(inc, rng.Millis(0, 1000), cap_options_.tick, [this, controller] { CapTick(*controller); });
  Every(inc, rng.Millis(0, 250), absl::Milliseconds(250),
        [engine] { EngineDriver::CheckCancels(*engine); });
  if (p.sweeper) {
    Every(inc, rng.Millis(0, 500), params_.sweep_interval, [this, engine, inc] {
      absl::StatusOr<int> n = engine->SweepOnce();
      if (n.ok() && *n > 0) {
        world_.Record(absl::StrCat(world_.Stamp(), " ", inc->name, " sweep acted on ", *n));
      }
    });
    // Retention (issue 25), as `serve` and `worker` apply it: a short
    // horizon, small batches (no draw from the world's generator).
    RetentionPolicy policy;
    policy.keep_runs = kSimKeepRuns;
    policy.audit_horizon = kSimAuditHorizon;
    policy.batch_runs = 2;
    policy.max_batches_per_pass = 1;
    // A schedule's runs join the checked ones only when it is paused (and
    // their children with them): until then the checker does not see them
    // end, so their workflow and the child workflow are kept (each
    // workflow's own keep_runs; the other workloads are pruned).
    if (!schedule_.id.empty()) {
      policy.keep_runs_by_workflow[schedule_.workflow] = absl::InfiniteDuration();
      if (child_workload_.has_value()) {
        policy.keep_runs_by_workflow[child_workload_->name] = absl::InfiniteDuration();
      }
    }
    // Its store injects no faults: a fault draws from the world's
    // generator, and each pass drawing would move every seed's history (the
    // injected bugs are caught at seeds of these histories). It still dies
    // with its life (FaultStore::Before).
    p.retention_stores.push_back(
        std::make_unique<FaultStore>(base_.store.get(), &world_, &faults_, inc, /*injects=*/false));
    p.retentions.push_back(std::make_unique<engine_internal::RetentionSweep>(
        p.retention_stores.back().get(), p.clocks.back().get(), policy, NullLogger()));
    engine_internal::RetentionSweep* retention = p.retentions.back().get();
    Every(inc, absl::Milliseconds(150) * p.id, kSimRetentionPass, [this, retention, inc] {
      absl::StatusOr<PruneResult> got = retention->PassOnce();
      if (!got.ok() || got->runs > 0) {
        world_.Record(absl::StrCat(world_.Stamp(), " ", inc->name, " retention: ",
                                   got.ok() ? absl::StrCat(got->runs, " runs deleted")
                                            : std::string(got.status().message())));
      }
    });
    // Every sweeping process fires the schedules, as `serve` and `worker`
    // do (no draw from the world's generator: seeds without a schedule keep
    // their histories).
    if (!schedule_.id.empty()) {
      Every(inc, absl::Milliseconds(100) * p.id, absl::Milliseconds(250), [this, engine, inc] {
        absl::StatusOr<int> n = engine->FireSchedulesOnce();
        if (!n.ok() || *n > 0) {
          world_.Record(absl::StrCat(world_.Stamp(), " ", inc->name, " fires schedules: ",
                                     n.ok() ? absl::StrCat(*n, " runs started")
                                            : std::string(n.status().message())));
        }
      });
    }
  }
}

void Sim::ClientTick() {
  Rng& rng = world_.rng();
  if (static_cast<int>(runs_.size()) < params_.max_runs && (runs_.empty() || rng.Chance(0.35))) {
    const Workload& w = workloads_[rng.Below(workloads_.size())];
    StartRunRequest req;
    req.workflow = w.wf;
    const std::string tenant = rng.Chance(0.5) ? "t1" : "t2";
    req.inputs = {{"tenant", tenant}};
    if (rng.Chance(0.5)) req.budget_micros = 40 + static_cast<int64_t>(rng.Below(400));
    if (w.concurrency_limit > 0 && keys_rng_.Chance(0.3)) {
      req.priority = static_cast<int>(keys_rng_.Below(kMaxPriority + 1));
    }
    absl::StatusOr<CreateRunResult> r = client_->StartRun(req);
    if (!r.ok() && absl::StrContains(r.status().message(), "budget preflight")) {
      world_.Record(absl::StrCat(world_.Stamp(), " client start refused: ", r.status().message()));
      return;
    }
    if (!r.ok()) {
      world_.Violate(absl::StrCat("StartRun refused the workload: ", r.status().ToString()));
      return;
    }
    runs_.push_back(r->run.id);
    world_.Record(absl::StrCat(
        world_.Stamp(), " client starts ", r->run.id, " of ", w.name, " for ", tenant,
        req.budget_micros ? absl::StrCat(" budget ", *req.budget_micros) : std::string()));
    return;
  }
  if (runs_.empty()) return;
  const std::string& id = runs_[rng.Below(runs_.size())];
  absl::StatusOr<RunRecord> run = client_->GetRun(id);
  if (!run.ok()) return;
  const uint64_t pick = rng.Below(100);
  if (run->status == RunStatus::kPaused && pick < 60) {
    Decide(id);
  } else if (pick >= 60 && pick < 66 && !IsTerminal(run->status)) {
    absl::StatusOr<RunRecord> r = client_->Cancel(id, "sim-client");
    world_.Record(absl::StrCat(world_.Stamp(), " client cancels ", id, ": ",
                               r.ok() ? Name(r->status) : std::string(r.status().message())));
  } else if (pick >= 66 && pick < 90 && IsTerminal(run->status) &&
             run->status != RunStatus::kCancelled) {
    const Workload* w = nullptr;
    for (const Workload& x : workloads_) {
      if (x.name == run->workflow_name) w = &x;
    }
    if (w == nullptr) return;
    const std::string& phase = w->phases[rng.Below(w->phases.size())];
    absl::StatusOr<RunRecord> r = client_->Rerun(id, phase, "", "sim-client");
    world_.Record(absl::StrCat(world_.Stamp(), " client reruns ", id, " from ", phase, ": ",
                               r.ok() ? std::string("queued") : std::string(r.status().message())));
  } else if (pick >= 90 && pick < 99) {
    const Workload* w = WorkloadOf(run->workflow_name);
    if (w != nullptr && !w->signals.empty()) SendSignal(*run, *w);
  } else if (pick == 99 && rng.Chance(0.3)) {
    absl::StatusOr<int> n = client_->ResetAll("sim-admin");
    world_.Record(absl::StrCat(world_.Stamp(), " admin reset: ",
                               n.ok() ? absl::StrCat(*n, " runs") : n.status().ToString()));
  }
}

void Sim::Decide(const std::string& run_id) {
  Rng& rng = world_.rng();
  absl::StatusOr<std::optional<PendingGate>> gate = client_->GetPendingGate(run_id);
  if (!gate.ok() || !gate->has_value()) return;
  const std::string current = (*gate)->proposal_digest;
  const bool stale = rng.Chance(0.25);
  DecisionRequest req;
  req.proposal_digest = stale ? "sha256:" + std::string(64, '0') : current;
  req.decision = rng.Chance(0.75) ? Decision::kApprove : Decision::kReject;
  const int tries = rng.Chance(0.3) ? 2 : 1;  // a second reviewer racing the first
  int accepted = 0;
  // Each pause of a run gets reviewers of its own (no draw: the seeds'
  // interleavings stay), so a rerun's approval names another reviewer.
  const int round = reviews_[run_id]++;
  for (int t = 0; t < tries; ++t) {
    const std::string reviewer = absl::StrCat("reviewer", t, "-", round);
    absl::StatusOr<RunRecord> r = client_->Decide(run_id, req, reviewer);
    world_.Record(
        absl::StrCat(world_.Stamp(), " ", reviewer, " decides ", Name(*req.decision),
                     stale ? " (stale digest)" : "", " on ", run_id, ": ",
                     r.ok() ? std::string("accepted") : std::string(r.status().message())));
    if (!r.ok()) continue;
    ++accepted;
    if (stale) {
      world_.Violate(absl::StrCat("a decision with a stale digest was accepted on ", run_id));
    }
  }
  if (accepted > 1) world_.Violate(absl::StrCat("two decisions accepted for one gate of ", run_id));
}

const Workload* Sim::WorkloadOf(const std::string& workflow) const {
  for (const Workload& w : workloads_) {
    if (w.name == workflow) return &w;
  }
  if (child_workload_.has_value() && child_workload_->name == workflow) return &*child_workload_;
  return nullptr;
}

bool Sim::Rests(const RunRecord& run) {
  return IsTerminal(run.status) || run.status == RunStatus::kPaused ||
         (run.status == RunStatus::kWaiting && !run.wait_signal.empty() &&
          !run.wake_at.has_value());
}

void Sim::SendSignal(const RunRecord& run, const Workload& w) {
  Rng& rng = world_.rng();
  const int n = ++signals_sent_;
  SignalRequest req;
  req.name = w.signals[rng.Below(w.signals.size())];
  req.payload = {{"n", n}};
  if (rng.Chance(0.4)) req.idempotency_key = absl::StrCat("key", n);
  absl::StatusOr<SendSignalResult> r = client_->Signal(run.id, req, "sim-client");
  world_.Record(absl::StrCat(world_.Stamp(), " client signals ", req.name, " #", n, " to ", run.id,
                             " (", Name(run.status), "): ",
                             r.ok() ? absl::StrCat("seq ", r->signal.seq,
                                                   r->resolved ? ", resolved its wait" : ", kept")
                                    : std::string(r.status().message())));
  // The client's calls meet no fault and nothing runs between its read of
  // the run and its send: a finished run refuses, any other keeps it.
  if (IsTerminal(run.status) != absl::IsFailedPrecondition(r.status()) ||
      (!IsTerminal(run.status) && !r.ok())) {
    world_.Violate(absl::StrCat("signal to run ", run.id, " (", Name(run.status),
                                "): ", r.status().ToString()));
    return;
  }
  if (!r.ok()) return;
  sent_[run.id][r->signal.seq] = {req.name, req.payload};
  if (req.idempotency_key.empty() || !rng.Chance(0.5)) return;
  absl::StatusOr<SendSignalResult> again = client_->Signal(run.id, req, "sim-client");
  if (!again.ok() || again->created || again->signal.seq != r->signal.seq) {
    world_.Violate(absl::StrCat("signal ", req.name, " sent again under key ", req.idempotency_key,
                                " to run ", run.id, " was kept twice: ",
                                again.ok() ? absl::StrCat("seq ", again->signal.seq)
                                           : again.status().ToString()));
  }
}

void Sim::CheckSignals(const RunRecord& run, const std::vector<StepRecord>& steps,
                       const Workload& w) {
  absl::StatusOr<std::vector<SignalRecord>> mailbox =
      base_.store->ListSignals(run.id, 0, SignalStore::kMaxMailbox);
  if (!mailbox.ok()) {
    world_.Violate(absl::StrCat("ListSignals ", run.id, ": ", mailbox.status().ToString()));
    return;
  }
  const auto& sent = sent_[run.id];
  std::map<std::string, const SignalRecord*> by_key;  // wait key -> the signal it consumed
  std::set<std::string> unconsumed;                   // names with a signal still in the mailbox
  for (const SignalRecord& sig : *mailbox) {
    // A child's end (engine/run/child_run.h): from a finished child of this
    // run, once, consumed (if at all) by one of its run steps' attempts.
    if (const std::string child_id = engine_internal::ChildOfSignal(sig.name);
        !child_id.empty()) {
      absl::StatusOr<RunRecord> child = base_.store->GetRun(child_id);
      if (!child.ok() && last_seen_.contains(child_id) && Pruned(child_id, child.status())) {
        child = last_seen_.at(child_id);  // deleted by retention: as it went
      }
      if (!child.ok() || child->parent_run_id != run.id || !IsTerminal(child->status) ||
          sig.payload.value("child_run_id", "") != child_id) {
        world_.Violate(absl::StrCat("run ", run.id, " keeps signal ", sig.name, " seq ", sig.seq,
                                    " with payload ", sig.payload.dump(),
                                    ", which no finished child of it sent"));
        return;
      }
      if (sig.consumed_by.empty()) {
        unconsumed.insert(sig.name);
      } else if (sig.consumed_by.find('#') == std::string::npos ||
                 !by_key.emplace(sig.consumed_by, &sig).second) {
        world_.Violate(absl::StrCat("run ", run.id, ": child end ", sig.name, " consumed by '",
                                    sig.consumed_by, "', not once by a run step's attempt"));
      }
      continue;
    }
    auto it = sent.find(sig.seq);
    if (it == sent.end() || it->second.first != sig.name || it->second.second != sig.payload) {
      world_.Violate(absl::StrCat("run ", run.id, " keeps signal ", sig.name, " seq ", sig.seq,
                                  " with payload ", sig.payload.dump(),
                                  ", which no client sent so"));
      return;
    }
    if (sig.consumed_by.empty()) {
      unconsumed.insert(sig.name);
      continue;
    }
    if (unconsumed.contains(sig.name)) {
      world_.Violate(absl::StrCat("run ", run.id, ": signal ", sig.name, " seq ", sig.seq,
                                  " was consumed while an earlier one of its name waits"));
    }
    const size_t colon = sig.consumed_by.find(':');
    const std::string path =
        colon == std::string::npos ? std::string() : sig.consumed_by.substr(colon + 1);
    auto wait = w.waits.find(path);
    if (wait == w.waits.end() || wait->second != sig.name) {
      world_.Violate(absl::StrCat("run ", run.id, ": signal ", sig.name, " seq ", sig.seq,
                                  " consumed by '", sig.consumed_by,
                                  "', no wait for it in the workflow"));
    }
    if (!by_key.emplace(sig.consumed_by, &sig).second) {
      world_.Violate(absl::StrCat("run ", run.id, ": wait ", sig.consumed_by,
                                  " consumed two signals (seq ", by_key[sig.consumed_by]->seq,
                                  " and ", sig.seq, ")"));
    }
  }
  // Exactly one of signal and timeout resolves a wait: a wait step that
  // succeeded consumed one signal and returns its payload; one that timed
  // out consumed none.
  // A rerun copies the records before its phase into the new revision: a
  // record the same as the one of the revision before is that one's copy,
  // and the wait that resolved it was the first revision's.
  std::map<std::pair<int64_t, std::string>, const StepRecord*> records;
  for (const StepRecord& st : steps) records[{st.revision, st.path}] = &st;
  for (const StepRecord& st : steps) {
    if (!w.waits.contains(st.path)) continue;
    int64_t origin = st.revision;
    for (auto prev = records.find({origin - 1, st.path});
         prev != records.end() && prev->second->state == st.state &&
         prev->second->output == st.output && prev->second->finished_at == st.finished_at;
         prev = records.find({origin - 1, st.path})) {
      --origin;
    }
    const std::string key = absl::StrCat(origin, ":", st.path);
    auto it = by_key.find(key);
    if (st.state == StepState::kSucceeded &&
        (it == by_key.end() || it->second->payload != st.output)) {
      world_.Violate(absl::StrCat("run ", run.id, ": wait ", key, " succeeded with ",
                                  st.output.dump(), " but consumed ",
                                  it == by_key.end() ? std::string("no signal")
                                                     : it->second->payload.dump()));
    } else if (st.state == StepState::kFailed && it != by_key.end()) {
      world_.Violate(absl::StrCat("run ", run.id, ": wait ", key, " failed (", st.error,
                                  ") yet consumed signal seq ", it->second->seq));
    }
  }
  if (run.status == RunStatus::kWaiting && !run.wait_signal.empty() &&
      unconsumed.contains(run.wait_signal)) {
    world_.Violate(absl::StrCat("run ", run.id, " rests waiting for signal ", run.wait_signal,
                                ", which its mailbox holds"));
  }
}

void Sim::FaultTick() {
  Rng& rng = world_.rng();
  if (!faults_.on || processes_.empty() || !rng.Chance(params_.crash)) return;
  Process& p = *processes_[rng.Below(processes_.size())];
  if (!p.inc->alive) return;
  p.inc->alive = false;
  ++crashes_;
  if (held_[p.inc.get()] > params_.executors) ++crashes_holding_many_;
  world_.Record(absl::StrCat(world_.Stamp(), " CRASH ", p.inc->name));
  const absl::Duration down = rng.Millis(200, 3000);
  // Unless the end of the faults brought it back first (Sim::Run): one
  // process has one life at a time, or a later life could not prove an
  // earlier one dead (restart recovery, issue 27).
  world_.At(world_.now() + down, nullptr, [this, &p] {
    if (!p.inc->alive) StartLife(p);
  });
}

// Events fold to the run's row: status, attempts; decisions one per pause;
// a run its executor cancelled had a cancel asked for in its revision; a
// finished step record never changes.
void Sim::CheckRun(const RunRecord& run) {
  absl::StatusOr<std::vector<Event>> events = base_.store->ListEvents(run.id, 0, kMaxReadLimit);
  if (!events.ok()) {
    world_.Violate(absl::StrCat("ListEvents ", run.id, ": ", events.status().ToString()));
    return;
  }
  if (static_cast<int64_t>(events->size()) != run.last_event_seq) {
    world_.Violate(absl::StrCat("run ", run.id, " has ", events->size(), " events, last seq ",
                                run.last_event_seq));
    return;
  }
  std::optional<RunStatus> status;
  std::optional<int> attempts = 0;
  bool pause_decided = false, cancel_asked = false;
  std::map<std::string, absl::Time> hang_started;  // a hang step's path -> its attempt's start
  for (size_t i = 0; i < events->size(); ++i) {
    const Event& e = (*events)[i];
    if (e.seq != static_cast<int64_t>(i) + 1) {
      world_.Violate(absl::StrCat("run ", run.id, ": event ", i + 1, " has seq ", e.seq));
      return;
    }
    const std::string& t = e.type;
    if (absl::StartsWith(t, "step.") && absl::EndsWith(e.data.value("path", ""), kHangSuffix)) {
      CheckHangEvent(run, e, hang_started);
    }
    if (t == "run.created") {
      status = RunStatus::kQueued;
    } else if (t == "run.started") {
      status = RunStatus::kRunning;
      attempts = e.data.value("attempt", 0);
    } else if (t == "run.paused") {
      status = RunStatus::kPaused;
      pause_decided = false;
    } else if (t == "run.waiting") {
      status = RunStatus::kWaiting;
    } else if (t == "run.resumed" && status == RunStatus::kWaiting) {
      status = RunStatus::kQueued;  // its timer was due
      attempts = 0;
    } else if (t == "run.decided") {
      if (pause_decided) {
        world_.Violate(
            absl::StrCat("run ", run.id, ": two decisions on one pause (seq ", e.seq, ")"));
      }
      pause_decided = true;
      status = RunStatus::kQueued;
      attempts.reset();  // whether a decision resets the attempts is not the fold's to say
    } else if (t == "run.rerun_requested") {
      status = RunStatus::kQueued;
      attempts = 0;
      cancel_asked = false;
    } else if (t == "run.released") {
      status = RunStatus::kQueued;
    } else if (t == "run.cancel_requested") {
      cancel_asked = true;
    } else if (t == "step.failed" && absl::StrContains(e.data.value("error", ""), "lease lost")) {
      // A fence refusal stops the execution as lease lost; the step stays
      // unrecorded for the next holder. Failing it would end the run failed.
      world_.Violate(absl::StrCat("run ", run.id, ": step ", e.data.value("path", ""),
                                  " failed on a fence refusal (seq ", e.seq,
                                  "): ", e.data.value("error", "")));
    } else if (t == "step.failed" && absl::StrContains(e.data.value("error", ""),
                                                       "a changed request is a different write")) {
      // A write's key names the decision it carries out: another decision
      // (a rerun approved by another reviewer) is another write, never a
      // refused one.
      world_.Violate(absl::StrCat("run ", run.id, ": step ", e.data.value("path", ""),
                                  " failed: its write was refused as another request under its key"
                                  " (seq ",
                                  e.seq, "): ", e.data.value("error", "")));
    } else if (t == "run.finished") {
      std::optional<RunStatus> to = ParseRunStatus(e.data.value("status", ""));
      const bool by_admin = absl::StartsWith(e.data.value("error", ""), "admin reset by ");
      if (to == RunStatus::kCancelled && status == RunStatus::kRunning && !cancel_asked &&
          !by_admin) {
        world_.Violate(absl::StrCat("run ", run.id, " was cancelled by its executor in a revision ",
                                    "no cancel was asked for (seq ", e.seq, ")"));
      }
      status = to;
    }
  }
  if (status != run.status) {
    world_.Violate(absl::StrCat("replay: run ", run.id, "'s events fold to ",
                                status ? Name(*status) : std::string("nothing"), ", the row says ",
                                Name(run.status)));
  }
  if (attempts.has_value() && *attempts != run.attempts) {
    world_.Violate(absl::StrCat("replay: run ", run.id, "'s events fold to ", *attempts,
                                " attempts, the row says ", run.attempts));
  }
  absl::StatusOr<std::vector<StepRecord>> steps = base_.store->ListSteps(run.id, std::nullopt);
  if (!steps.ok()) return;
  for (const StepRecord& s : *steps) {
    const std::string key = absl::StrCat(run.id, "/", s.revision, "/", s.path);
    const std::string value =
        absl::StrCat(Name(s.state), "|", s.attempt, "|", s.output.dump(), "|", s.error);
    auto [it, inserted] = records_.emplace(key, value);
    if (!inserted && it->second != value) {
      world_.Violate(absl::StrCat("step record ", key, " changed: ", it->second, " -> ", value));
    }
  }
  if (const Workload* w = WorkloadOf(run.workflow_name);
      w != nullptr && (!w->signals.empty() || (child_workload_.has_value() && w == &workloads_[0]))) {
    CheckSignals(run, *steps, *w);
  }
  // Step counts (distinct records of a revision) only grow: no redelivery,
  // takeover or retried commit takes one back or counts one twice.
  std::set<int64_t> revisions;
  for (const StepRecord& s : *steps) revisions.insert(s.revision);
  for (const int64_t rev : revisions) {
    const int total = engine_internal::CountSteps(*steps, rev).total();
    int& seen = counted_[absl::StrCat(run.id, "/", rev)];
    if (total < seen) {
      world_.Violate(absl::StrCat("step counts of run ", run.id, " revision ", rev, " fell from ",
                                  seen, " to ", total));
    }
    seen = total;
  }
}

// Every step is bounded (issue 25): an attempt of a hang step ends at its
// kind's default timeout, failed with class timeout, never sooner (it
// cannot end by itself). How much later is not bounded here: a process
// stopped past the deadline, or stopped again and again, still commits
// while no one else took its lease. That it ends at all is the liveness
// bound's: a run held by an unbounded step never comes to rest.
void Sim::CheckHangEvent(const RunRecord& run, const Event& e,
                         std::map<std::string, absl::Time>& started) {
  const std::string path = e.data.value("path", "");
  if (e.type == "step.started") {
    started[path] = e.at;
    return;
  }
  if (e.type == "step.succeeded") {
    world_.Violate(absl::StrCat("run ", run.id, ": step ", path, ", which never ends by itself, ",
                                "succeeded (seq ", e.seq, ")"));
    return;
  }
  if (e.type != "step.failed") return;
  if (e.data.value("error_class", "") != "timeout") {
    world_.Violate(absl::StrCat("run ", run.id, ": hung step ", path, " failed with class ",
                                e.data.value("error_class", ""), ", not timeout (seq ", e.seq,
                                "): ", e.data.value("error", "")));
  }
  auto it = started.find(path);
  if (it == started.end()) return;
  // The store stamps both events; a kill stops the attempt unrecorded (the
  // next one writes a step.started of its own).
  const absl::Duration took = e.at - it->second;
  if (took < kHangTimeout) {
    world_.Violate(absl::StrCat("run ", run.id, ": hung step ", path, "'s attempt took ",
                                absl::FormatDuration(took), ", its kind's default timeout is ",
                                absl::FormatDuration(kHangTimeout), " (seq ", e.seq, ")"));
  }
  started.erase(it);
}

void Sim::CheckConcurrency() {
  RunFilter running;
  running.status = RunStatus::kRunning;
  running.limit = 0;
  // One statement: one snapshot of every running run.
  absl::StatusOr<std::vector<RunRecord>> runs = base_.store->ListRuns(running);
  if (!runs.ok()) return;  // a read the faults broke; the next check reads again
  std::map<std::string, std::vector<std::string>> by_key;
  std::map<std::string, int> limit_of;
  for (const RunRecord& r : *runs) {
    const Workload* w = WorkloadOf(r.workflow_name);
    const int limit = w == nullptr ? 0 : w->concurrency_limit;
    if (r.concurrency_limit != limit || (limit > 0) == r.concurrency_key.empty()) {
      world_.Violate(absl::StrCat("run ", r.id, " has concurrency key '", r.concurrency_key,
                                  "' limit ", r.concurrency_limit, "; its workflow says limit ",
                                  limit));
    }
    if (r.concurrency_key.empty()) continue;
    by_key[r.concurrency_key].push_back(r.id);
    limit_of[r.concurrency_key] = r.concurrency_limit;
  }
  for (const auto& [key, ids] : by_key) {
    if (static_cast<int>(ids.size()) > limit_of[key]) {
      world_.Violate(absl::StrCat(ids.size(), " runs of concurrency key ", key,
                                  " are running at once (limit ", limit_of[key],
                                  "): ", absl::StrJoin(ids, ", ")));
    }
  }
}

void Sim::CheckSpans() {
  for (TraceSpan& s : spans_.Take()) {
    ++spans_checked_;
    const nlohmann::json& a = s.attributes;
    const std::string run_id = a.value("runloom.run_id", "");
    if (!span_ids_.insert(s.span_id).second) {
      world_.Violate(
          absl::StrCat("span ", s.name, " (", s.span_id, ") of run ", run_id, " exported twice"));
      return;
    }
    if (run_id.empty()) continue;  // a model call's or an http request's: no run attribute
    auto [trace, fresh] = trace_of_.try_emplace(run_id, s.trace_id);
    if (!fresh && trace->second != s.trace_id) {
      world_.Violate(absl::StrCat("run ", run_id, " has spans in two traces: ", trace->second,
                                  " and ", s.trace_id, " (", s.name, ")"));
      return;
    }
    if (absl::StartsWith(s.name, "run ")) {
      const int64_t revision = a.value("runloom.revision", int64_t{0});
      const std::string status = a.value("runloom.status", "");
      const std::optional<RunStatus> parsed = ParseRunStatus(status);
      if (!parsed.has_value() || !IsTerminal(*parsed)) {
        world_.Violate(absl::StrCat("a run span for run ", run_id, " revision ", revision,
                                    " whose status is '", status, "'"));
        return;
      }
      run_span_status_[{run_id, revision}] = status;
      if (IsPruned(run_id)) continue;
      absl::StatusOr<RunRecord> now = base_.store->GetRun(run_id);
      if (now.ok() && now->revision == revision && now->status != *parsed) {
        world_.Violate(absl::StrCat("a run span says run ", run_id, " revision ", revision,
                                    " ended ", status, " but the run is ", Name(now->status)));
        return;
      }
    } else if (absl::StartsWith(s.name, "step ")) {
      const int64_t revision = a.value("runloom.revision", int64_t{0});
      if (s.parent_span_id != RunSpanIdOf(run_id, revision)) {
        world_.Violate(absl::StrCat("step span ", s.name, " of run ", run_id, " revision ",
                                    revision, " is not under its run span"));
        return;
      }
    }
  }
}

void Sim::Check() {
  if (!world_.violation().empty()) return;
  // Nothing reached the store since the last check: nothing can have changed.
  if (faults_.calls_returned == checked_at_) return;
  checked_at_ = faults_.calls_returned;
  JoinChildren();
  for (const std::string& id : runs_) {
    if (IsPruned(id)) continue;
    absl::StatusOr<RunRecord> run = base_.store->GetRun(id);
    if (!run.ok()) {
      if (Pruned(id, run.status())) continue;
      return;
    }
    last_seen_[id] = *run;
    CheckRun(*run);
  }
  for (const auto& [key, n] : service_->effects()) {
    if (n > 1) world_.Violate(absl::StrCat("external write ", key, " applied ", n, " times"));
  }
  CheckConcurrency();
  CheckSpans();
  // spent + reserved <= limit, for every tenant and run, at every step.
  auto overspent = [](const BudgetFigures& f) {
    return f.limit_micros.has_value() && f.spent_micros + f.reserved_micros > *f.limit_micros;
  };
  absl::StatusOr<std::vector<TenantBudget>> tenants = base_.store->ListTenantBudgets();
  for (const TenantBudget& t : tenants.ok() ? *tenants : std::vector<TenantBudget>{}) {
    auto paid = provider_->charged().find(t.tenant);
    if (paid != provider_->charged().end() &&
        paid->second > t.figures.spent_micros + t.figures.reserved_micros) {
      world_.Violate(absl::StrCat("tenant ", t.tenant, " was charged ", paid->second,
                                  " micros by the provider but its books hold spent ",
                                  t.figures.spent_micros, " + reserved ",
                                  t.figures.reserved_micros));
    }
    if (overspent(t.figures)) {
      world_.Violate(absl::StrCat("tenant ", t.tenant, " overspent: spent ", t.figures.spent_micros,
                                  " + reserved ", t.figures.reserved_micros, " > limit ",
                                  *t.figures.limit_micros));
    }
  }
  for (const std::string& id : runs_) {
    absl::StatusOr<RunBudget> b = base_.store->GetRunBudget(id);
    if (b.ok() && overspent(b->figures)) {
      world_.Violate(absl::StrCat("run ", id, " overspent its budget: spent ",
                                  b->figures.spent_micros, " + reserved ",
                                  b->figures.reserved_micros, " > ", *b->figures.limit_micros));
    }
  }
}

// Exactly one effect for every write a run went past; no budget left
// reserved on a run at rest.
bool Sim::Pruned(const std::string& id, const absl::Status& gone) {
  if (IsPruned(id)) return true;
  auto seen = last_seen_.find(id);
  if (!absl::IsNotFound(gone) || seen == last_seen_.end() || !IsTerminal(seen->second.status)) {
    world_.Violate(
        absl::StrCat("run ", id, " is gone (", gone.ToString(), "); last seen ",
                     seen == last_seen_.end() ? std::string("never") : Name(seen->second.status),
                     ": retention deletes finished runs only"));
    return false;
  }
  pruned_.insert(id);
  world_.Record(absl::StrCat(world_.Stamp(), " ", id, " (", Name(seen->second.status),
                             ") was deleted by retention"));
  return true;
}

void Sim::CheckStageEvent(const std::string& who, const std::string& channel,
                          const std::string& payload) {
  ++stage_events_;
  auto bad = [&](const std::string& what) {
    world_.Violate(
        absl::StrCat("stage event from ", who, " on ", channel, ": ", what, ": ", payload));
  };
  const nlohmann::json e = nlohmann::json::parse(payload, nullptr, false);
  if (!e.is_object()) return bad("not a JSON object");
  static constexpr const char* kRequired[] = {
      "correlation_id", "document_id", "tenant_id", "node_id", "stage", "status", "timestamp"};
  for (auto it = e.begin(); it != e.end(); ++it) {
    const std::string& key = it.key();
    const bool known = key == "error" || std::any_of(std::begin(kRequired), std::end(kRequired),
                                                     [&key](const char* k) { return key == k; });
    if (!known || !it->is_string()) return bad(absl::StrCat("field '", key, "'"));
  }
  for (const char* key : kRequired) {
    if (!e.contains(key)) return bad(absl::StrCat("no '", key, "'"));
  }
  const std::string id = e["correlation_id"].get<std::string>();
  absl::StatusOr<RunRecord> run = base_.store->GetRun(id);
  if (!run.ok()) return bad("no such run");
  auto w = std::find_if(workloads_.begin(), workloads_.end(),
                        [&](const Workload& x) { return x.name == run->workflow_name; });
  if (w == workloads_.end() || !w->staged) return bad("its workflow has no stage_events block");
  auto input = [&](const char* name, const char* fallback) {
    return run->inputs.is_object() && run->inputs.contains(name) && run->inputs[name].is_string()
               ? run->inputs[name].get<std::string>()
               : std::string(fallback);
  };
  const std::string tenant = input("tenant", "t1");
  const std::string node = input("node", "n1");
  if (e["document_id"] != input("doc", "d1") || e["tenant_id"] != tenant || e["node_id"] != node ||
      channel != absl::StrCat("pipeline:", tenant, ":", node)) {
    return bad("ids or channel not the run's inputs");
  }
  const std::string stage = e["stage"].get<std::string>();
  const std::string status = e["status"].get<std::string>();
  if (stage == "completed" || stage == "failed") {
    // The run's end, published after its terminal status committed: the
    // newest run.finished says so (a rerun may have come in between, in
    // another process, as it may in production).
    absl::StatusOr<std::vector<Event>> log = base_.store->ListEvents(id, 0, kMaxReadLimit);
    std::optional<RunStatus> ended;
    for (const Event& ev : log.ok() ? *log : std::vector<Event>{}) {
      if (ev.type == event_types::kRunFinished) ended = ParseRunStatus(ev.data.value("status", ""));
    }
    const bool completed = ended == RunStatus::kCompleted;
    if (!ended.has_value() || (stage == "completed") != completed ||
        status != (completed ? "succeeded" : "failed")) {
      return bad(absl::StrCat("a terminal stage event for a run whose last end is ",
                              ended ? Name(*ended) : "none", " (now ", Name(run->status), ")"));
    }
  } else if (status != "started" || !w->stages.contains(stage) ||
             run->status != RunStatus::kRunning) {
    return bad(
        absl::StrCat("stage '", stage, "' ", status, " while the run is ", Name(run->status)));
  }
  world_.Record(
      absl::StrCat(world_.Stamp(), " ", who, " stage event ", id, " ", stage, "/", status));
}

void Sim::CapTick(ConcurrencyController& c) {
  Rng& rng = world_.rng();
  // The calls this process made since its last tick: some found every slot
  // taken (demand), now and then one is answered 429 or fails.
  const int calls = static_cast<int>(rng.Below(5));
  const absl::Time now = world_.now();
  for (int i = 0; i < calls; ++i) {
    CallOutcome::Kind kind = CallOutcome::Kind::kOk;
    if (rng.Chance(0.03)) kind = CallOutcome::Kind::kRateLimited;
    if (rng.Chance(0.02)) kind = CallOutcome::Kind::kError;
    c.Observe({.kind = kind,
               .started = now - absl::Milliseconds(500),
               .latency = rng.Millis(200, 1200),
               .waited = rng.Chance(0.5)});
  }
  const CapLimits l = c.Tick();
  if (l.leader) {
    world_.Record(absl::StrCat(world_.Stamp(), " ", c.id(), " LLM cap ", l.cap));
  }
}

void Sim::CheckCapEnd() {
  // Faults are off and every process lives: within the lease and two ticks
  // one controller holds the lease, and it alone believes it decides.
  const absl::Time until =
      world_.now() + cap_options_.lease + 2 * cap_options_.tick + absl::Milliseconds(500);
  while (world_.violation().empty() && world_.now() < until) {
    world_.AdvanceTo(std::min(world_.NextTimer(), until));
  }
  if (!world_.violation().empty()) return;
  std::vector<std::string> leaders;
  for (const auto& p : processes_) {
    for (size_t i = 0; i < p->controllers.size(); ++i) {
      if (p->controller_lives[i]->alive && p->controllers[i]->limits().leader) {
        leaders.push_back(p->controllers[i]->id());
      }
    }
  }
  absl::StatusOr<std::optional<int>> cap = cap_board_->Read("fake");
  if (leaders.size() != 1 || leaders.front() != cap_ledger_.holder) {
    world_.Violate(
        absl::StrCat("liveness: ", leaders.size(), " LLM cap controllers believe they decide (",
                     absl::StrJoin(leaders, ", "), "); the lease is ", cap_ledger_.holder, "'s"));
  } else if (!cap.ok() || !cap->has_value()) {
    world_.Violate("liveness: no fresh LLM cap on the board after the faults stopped");
  }
  world_.Record(absl::StrCat("end: LLM cap ", cap.ok() && cap->has_value() ? **cap : 0, " by ",
                             cap_ledger_.holder, ", ", cap_ledger_.publications, " publications, ",
                             cap_ledger_.takeovers, " takeovers; ", stage_events_,
                             " stage events; ", faults_.parks, " runs parked (",
                             faults_.signal_parks, " for a signal), ", faults_.wakes,
                             " timers woken; ", faults_.signals_kept, " signals kept, ",
                             faults_.signals_resolved, " resolving a wait; ",
                             faults_.keyed_leases, " leases of keyed runs, ", faults_.over_limit,
                             " refused over a concurrency limit; ", faults_.leases_ended,
                             " leases of dead holders ended early"));
}

void Sim::CheckEnd() {
  for (const std::string& id : runs_) {
    if (IsPruned(id)) continue;  // checked while it lived
    absl::StatusOr<RunRecord> run = base_.store->GetRun(id);
    // The attempt cap is the workflow's, whichever process admitted the run.
    auto w = std::find_if(workloads_.begin(), workloads_.end(), [&](const Workload& x) {
      return run.ok() && x.name == run->workflow_name;
    });
    if (w != workloads_.end() && run->max_attempts != w->max_attempts) {
      world_.Violate(absl::StrCat("run ", id, " has attempt cap ", run->max_attempts,
                                  "; its workflow ", w->name, " says ", w->max_attempts));
    }
    // Nobody changes the catalog here: a run failed closed on its pinned
    // workflow was failed for a store error, which only poison may do.
    if (run.ok() && run->status == RunStatus::kFailed &&
        absl::StrContains(run->error, "fails closed")) {
      world_.Violate(
          absl::StrCat("run ", id, " failed closed on a catalog nobody changed: ", run->error));
    }
    absl::StatusOr<std::vector<Reservation>> held = base_.store->ListReservations(id);
    for (const Reservation& r : held.ok() ? *held : std::vector<Reservation>{}) {
      if (r.state == ReservationState::kReserved) {
        world_.Violate(absl::StrCat("run ", id, " is at rest with ", r.amount_micros,
                                    " micros still reserved for ", r.key.step_path, " attempt ",
                                    r.key.attempt));
      }
    }
    absl::StatusOr<std::vector<WriteOperation>> ops = base_.store->ListWrites(id);
    if (!ops.ok()) continue;
    for (const WriteOperation& op : *ops) {
      if (op.state != WriteState::kDone) continue;
      auto it = service_->effects().find(op.idempotency_key);
      const int n = it == service_->effects().end() ? 0 : it->second;
      if (op.result->http_status == 201 || op.result->source == "lookup") {
        if (n != 1) {
          world_.Violate(absl::StrCat("write ", op.idempotency_key, " of run ", id,
                                      " is recorded done with ", n, " effects"));
        }
      }
    }
  }
}

void Sim::CreateSchedule() {
  // Its own generator, from the seed alone: the world's draws stay as they
  // were, so a seed without a schedule keeps its history.
  std::mt19937_64 gen(options_.seed ^ 0x5c4ed01e5c4ed01eULL);
  if (gen() % 3 != 0) return;
  static constexpr const char* kOverlap[] = {"skip", "allow", "cancel"};
  static constexpr const char* kCatchUp[] = {"none", "latest", "all"};
  const Workload& w = workloads_[0];
  if (absl::Status s = client_->RegisterWorkflow(w.wf).status(); !s.ok()) {
    world_.Violate(absl::StrCat("registering ", w.name, " for its schedule: ", s.ToString()));
    return;
  }
  schedule_.id = "sim";
  schedule_.workflow = w.name;
  schedule_.cron = absl::StrCat("*/", 2 + gen() % 4, " * * * * *");
  schedule_.inputs = {{"tenant", "t1"}};
  schedule_.overlap = kOverlap[gen() % 3];
  schedule_.catch_up = kCatchUp[gen() % 3];
  absl::StatusOr<ScheduleRecord> made = client_->CreateSchedule(schedule_);
  if (!made.ok()) {
    world_.Violate(absl::StrCat("creating the schedule: ", made.status().ToString()));
    return;
  }
  schedule_from_ = world_.now();
  world_.Record(absl::StrCat(world_.Stamp(), " client schedules ", w.name, " at '",
                             schedule_.cron, "', overlap ", schedule_.overlap, ", catch-up ",
                             schedule_.catch_up, ", first tick ",
                             absl::FormatTime(made->next_fire_at)));
}

void Sim::StopSchedule() {
  if (schedule_.id.empty()) return;
  absl::StatusOr<ScheduleRecord> paused = client_->PauseSchedule(schedule_.id);
  if (!paused.ok()) {
    world_.Violate(absl::StrCat("pausing the schedule: ", paused.status().ToString()));
    return;
  }
  schedule_until_ = world_.now();
  // Its runs join the checked ones: each must rest like a client's.
  RunFilter f;
  f.workflow_name = schedule_.workflow;
  f.limit = 0;
  absl::StatusOr<std::vector<RunRecord>> runs = base_.store->ListRuns(f);
  if (!runs.ok()) {
    world_.Violate(absl::StrCat("listing the schedule's runs: ", runs.status().ToString()));
    return;
  }
  for (const RunRecord& run : *runs) {
    if (!absl::StartsWith(run.idempotency_key, "schedule:sim:")) continue;
    if (std::find(runs_.begin(), runs_.end(), run.id) == runs_.end()) runs_.push_back(run.id);
    last_seen_[run.id] = run;
    ++schedule_runs_;
  }
  world_.Record(absl::StrCat(world_.Stamp(), " client pauses the schedule: ", schedule_runs_,
                             " runs, last tick fired ",
                             paused->last_fired_at ? absl::FormatTime(*paused->last_fired_at)
                                                   : std::string("none")));
}

void Sim::CheckSchedule() {
  if (schedule_.id.empty()) return;
  absl::StatusOr<CronSpec> spec = CronSpec::Parse(schedule_.cron);
  if (!spec.ok()) {
    world_.Violate(absl::StrCat("the schedule's cron: ", spec.status().ToString()));
    return;
  }
  RunFilter f;
  f.workflow_name = schedule_.workflow;
  f.limit = 0;
  absl::StatusOr<std::vector<RunRecord>> runs = base_.store->ListRuns(f);
  if (!runs.ok()) return;
  std::set<std::string> keys;
  int n = 0;
  for (const RunRecord& run : *runs) {
    if (!absl::StartsWith(run.idempotency_key, "schedule:sim:")) continue;
    ++n;
    int64_t secs = 0;
    if (!absl::SimpleAtoi(run.idempotency_key.substr(13), &secs)) {
      world_.Violate(absl::StrCat("schedule run ", run.id, " has key ", run.idempotency_key));
      return;
    }
    const absl::Time tick = absl::FromUnixSeconds(secs);
    if (NextFireTime(*spec, absl::UTCTimeZone(), tick - absl::Seconds(1)) != tick) {
      world_.Violate(absl::StrCat("schedule run ", run.id, " is for ", absl::FormatTime(tick),
                                  ", not a tick of '", schedule_.cron, "'"));
    }
    if (tick <= schedule_from_ || tick > schedule_until_) {
      world_.Violate(absl::StrCat("schedule run ", run.id, " is for ", absl::FormatTime(tick),
                                  ", outside the time the schedule was active"));
    }
    if (!keys.insert(run.idempotency_key).second) {
      world_.Violate(absl::StrCat("tick ", absl::FormatTime(tick), " started two runs"));
    }
  }
  for (const std::string& id : pruned_) {  // joined at the pause, deleted since
    auto seen = last_seen_.find(id);
    if (seen != last_seen_.end() &&
        absl::StartsWith(seen->second.idempotency_key, "schedule:sim:")) {
      ++n;
    }
  }
  if (n != schedule_runs_) {
    world_.Violate(absl::StrCat("the schedule started ", n - schedule_runs_,
                                " runs after it was paused"));
  }
}

void Sim::AddChildStep() {
  std::mt19937_64 gen(options_.seed ^ 0xc41dc41dc41dc41dULL);
  if (gen() % 3 != 0 || workloads_.empty()) return;
  Workload c;
  c.name = "simchild";
  c.max_attempts = params_.max_attempts;
  const absl::Duration nap = absl::Milliseconds(100 + static_cast<int64_t>(gen() % 900));
  // times: 0 or 1 succeeds (the retry takes the one), 2 fails the child.
  const uint64_t times = gen() % 3;
  c.yaml = absl::StrCat("name: simchild\ndescription: simulated child\ntenant: tenant\nmax_attempts: ",
                        c.max_attempts,
                        "\ninputs:\n  tenant: {type: string, default: t1}\nsteps:\n"
                        "  - {id: c1, kind: sleep, duration: ", Ms(nap), "}\n"
                        "  - id: c2\n    kind: fail\n    times: ", times,
                        "\n    class: unavailable\n"
                        "    retry: {max_attempts: 2, initial_delay: 100ms, on: [unavailable]}\n"
                        "  - {id: c3, kind: noop, output: {done: true}}\n");
  c.worst = nap + absl::Milliseconds(300);
  c.phases = {""};
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(c.yaml, "simchild.yaml");
  if (!wf.ok()) {
    world_.Violate(absl::StrCat("the child workload: ", wf.status().ToString(), "\n", c.yaml));
    return;
  }
  c.wf = *wf;
  if (absl::Status s = client_->RegisterWorkflow(c.wf).status(); !s.ok()) {
    world_.Violate(absl::StrCat("registering simchild: ", s.ToString()));
    return;
  }
  Workload& w = workloads_[0];
  const size_t n = w.phases.size() + 1;
  child_step_ = absl::StrCat("s", n);
  const std::string phase = absl::StrCat("p", n);
  absl::StrAppend(&w.yaml, "  - id: ", child_step_, "\n    phase: ", phase,
                  "\n    kind: run\n    workflow: simchild\n"
                  "    inputs: {tenant: \"{{ inputs.tenant }}\"}\n");
  w.phases.push_back(phase);
  w.worst += c.worst;
  absl::StatusOr<Workflow> parent = LoadWorkflowYaml(w.yaml, absl::StrCat(w.name, ".yaml"));
  if (!parent.ok()) {
    world_.Violate(absl::StrCat("workload 0 with its run step: ", parent.status().ToString()));
    return;
  }
  w.wf = *parent;
  world_.Record(absl::StrCat("child workflow simchild:\n", c.yaml, "workload ", w.name,
                             " ends with run step ", child_step_));
  child_workload_ = std::move(c);
}

void Sim::JoinChildren() {
  if (!child_workload_.has_value()) return;
  for (size_t i = 0; i < runs_.size(); ++i) {
    const std::string parent = runs_[i];  // runs_ may grow in the loop
    RunFilter f;
    f.parent_run_id = parent;
    f.limit = 0;
    absl::StatusOr<std::vector<RunRecord>> kids = base_.store->ListRuns(f);
    if (!kids.ok()) continue;
    std::set<std::string> steps;  // "revision/path": one child each, at every moment
    for (const RunRecord& k : *kids) {
      const engine_internal::RunContext ctx = engine_internal::ContextOf(k);
      const std::string step = ctx.parent.has_value()
                                   ? absl::StrCat(ctx.parent->revision, "/", ctx.parent->step_path)
                                   : "?";
      if (!steps.insert(step).second) {
        world_.Violate(absl::StrCat("run ", parent, " has two children for its step ", step, ": ",
                                    k.id, " is the second"));
        return;
      }
      if (std::find(runs_.begin(), runs_.end(), k.id) != runs_.end()) continue;
      runs_.push_back(k.id);
      last_seen_[k.id] = k;
      ++children_;
      world_.Record(absl::StrCat(world_.Stamp(), " child ", k.id, " of ", parent, " (",
                                 k.idempotency_key, ") joins the checked runs"));
    }
  }
}

void Sim::CheckChildren() {
  if (!child_workload_.has_value()) return;
  JoinChildren();
  for (const std::string& id : runs_) {
    absl::StatusOr<RunRecord> parent = base_.store->GetRun(id);
    if (!parent.ok()) continue;
    RunFilter f;
    f.parent_run_id = id;
    f.limit = 0;
    absl::StatusOr<std::vector<RunRecord>> kids = base_.store->ListRuns(f);
    if (!kids.ok()) continue;
    // One child per parent step (and attempt: these run steps retry not),
    // whatever crashed or woke the parent in between.
    std::map<std::string, int> per_step;  // "revision/path" -> children
    for (const RunRecord& k : *kids) {
      const engine_internal::RunContext ctx = engine_internal::ContextOf(k);
      const std::string step = ctx.parent.has_value()
                                   ? absl::StrCat(ctx.parent->revision, "/", ctx.parent->step_path)
                                   : "?";
      if (++per_step[step] > 1) {
        world_.Violate(absl::StrCat("run ", id, " has two children for its step ", step, ": ",
                                    k.id, " is the second"));
        return;
      }
    }
    std::map<std::string, const RunRecord*> by_key;
    for (const RunRecord& k : *kids) {
      const engine_internal::RunContext ctx = engine_internal::ContextOf(k);
      if (!ctx.parent.has_value() || ctx.parent->run_id != id ||
          k.idempotency_key !=
              engine_internal::ChildKey(id, ctx.parent->revision, ctx.parent->step_path, 1)) {
        world_.Violate(absl::StrCat("child ", k.id, " of ", id, " has key '", k.idempotency_key,
                                    "', not its parent step's first attempt's"));
        return;
      }
      by_key.emplace(k.idempotency_key, &k);
      if (IsTerminal(parent->status) && !IsTerminal(k.status)) {
        world_.Violate(absl::StrCat("child ", k.id, " is ", Name(k.status), " at rest; its parent ",
                                    id, " is ", Name(parent->status)));
        return;
      }
    }
    // The parent's run step's record, in each revision, against its child.
    absl::StatusOr<std::vector<StepRecord>> steps = base_.store->ListSteps(id, std::nullopt);
    for (const StepRecord& s : steps.ok() ? *steps : std::vector<StepRecord>{}) {
      if (s.kind != "run") continue;
      auto child = by_key.find(engine_internal::ChildKey(id, s.revision, s.path, 1));
      // A child retention deleted was checked while it lived (and seen
      // finished when it went).
      if (const std::string went = s.output.is_object() ? s.output.value("run_id", "") : "";
          child == by_key.end() && last_seen_.contains(went) &&
          Pruned(went, base_.store->GetRun(went).status())) {
        continue;
      }
      if (s.state == StepState::kSucceeded) {
        if (child == by_key.end() || child->second->status != RunStatus::kCompleted ||
            s.output.value("run_id", "") != child->second->id) {
          world_.Violate(absl::StrCat("run ", id, " step ", s.path, " revision ", s.revision,
                                      " succeeded with ", s.output.dump(),
                                      " but its child is not that completed run"));
          return;
        }
      } else if (s.state == StepState::kFailed && child != by_key.end() &&
                 (!IsTerminal(child->second->status) ||
                  child->second->status == RunStatus::kCompleted)) {
        world_.Violate(absl::StrCat("run ", id, " step ", s.path, " revision ", s.revision,
                                    " failed (", s.error, ") but its child ", child->second->id,
                                    " is ", Name(child->second->status)));
        return;
      }
    }
  }
}

bool Sim::AllRest() {
  for (const std::string& id : runs_) {
    if (IsPruned(id)) continue;  // it went finished
    absl::StatusOr<RunRecord> run = base_.store->GetRun(id);
    if (!run.ok() || !Rests(*run)) return false;
  }
  return true;
}

// Once faults stop, every run rests (terminal, paused at a gate, or waiting
// for a signal with no timeout) within:
// one recovery (the lease runs out, a sweep, the queued grace or a
// redelivery, a poll) and the longest workflow's work with every retry,
// once per run queued behind the same executors.
absl::Duration Sim::LivenessBound() const {
  const absl::Duration recover = params_.ttl + params_.sweep_interval +
                                 std::max(params_.queued_grace, params_.visibility) +
                                 params_.idle_poll + params_.ttl / 3;
  absl::Duration worst;
  for (const Workload& w : workloads_) worst = std::max(worst, w.worst);
  if (child_workload_.has_value()) {
    // A parent whose child's end signal was lost waits for its poll timer
    // (engine/run/child_run.cc: at most a minute).
    worst += absl::Minutes(1);
  }
  const int executors = params_.processes * params_.executors;
  int waves = (static_cast<int>(runs_.size()) + executors - 1) / executors;
  // Runs of one concurrency key take turns: at worst one after another,
  // each found by a claimer's next poll once the slot before it frees.
  bool keyed = false;
  for (const Workload& w : workloads_) keyed = keyed || w.concurrency_limit > 0;
  if (!keyed) return 2 * recover + (waves + 1) * worst + absl::Seconds(2);
  waves = static_cast<int>(runs_.size());
  return 2 * recover + (waves + 1) * (worst + params_.idle_poll) + absl::Seconds(2);
}

SimResult Sim::Run() {
  Choose();
  SimResult result;
  if (absl::Status s = Open(); !s.ok()) {
    world_.Violate(absl::StrCat("setting up: ", s.ToString()));
  }
  Every(nullptr, absl::ZeroDuration(), absl::Milliseconds(300), [this] {
    if (clients_on_) Act(client_inc_, [this] { ClientTick(); });
  });
  Every(nullptr, absl::Milliseconds(500), absl::Milliseconds(700), [this] { FaultTick(); });
  while (world_.violation().empty() && world_.timers_fired() < options_.steps) {
    world_.AdvanceTo(world_.NextTimer());
    Check();
  }
  // Faults stop; every process comes back; the runs must come to rest.
  faults_.on = false;
  clients_on_ = false;
  StopSchedule();
  for (auto& p : processes_) {
    p->inc->paused_until = absl::InfinitePast();
    if (!p->inc->alive) StartLife(*p);
  }
  const absl::Duration bound = LivenessBound();
  const absl::Time until = world_.now() + bound;
  world_.Record(absl::StrCat(world_.Stamp(), " faults stop; every run must rest within ",
                             absl::FormatDuration(bound)));
  while (world_.violation().empty() && !AllRest() && world_.now() < until) {
    world_.AdvanceTo(std::min(world_.NextTimer(), until));
    Check();
  }
  if (world_.violation().empty()) {
    for (const std::string& id : runs_) {
      absl::StatusOr<RunRecord> run = base_.store->GetRun(id);
      if (run.ok() && !Rests(*run)) {
        world_.Violate(absl::StrCat("liveness: run ", id, " is still ", Name(run->status), " ",
                                    absl::FormatDuration(bound), " after the faults stopped"));
        break;
      }
    }
  }
  if (world_.violation().empty()) CheckCapEnd();
  if (world_.violation().empty()) CheckEnd();
  if (world_.violation().empty()) CheckSchedule();
  if (world_.violation().empty()) CheckChildren();
  if (world_.violation().empty()) CheckSpans();
  result.spans = spans_checked_;
  for (const std::string& id : runs_) {
    if (IsPruned(id)) {  // it ended (the checker saw it finished) and retention deleted it
      ++result.runs_ended;
      ++result.runs_pruned;
      world_.Record(absl::StrCat("end: ", id, " deleted by retention"));
      continue;
    }
    absl::StatusOr<RunRecord> run = base_.store->GetRun(id);
    if (!run.ok()) continue;
    if (IsTerminal(run->status)) ++result.runs_ended;
    if (run->status == RunStatus::kPaused) ++result.runs_at_gate;
    if (run->status == RunStatus::kWaiting) ++result.runs_at_wait;
    world_.Record(absl::StrCat("end: ", id, " ", Name(run->status), " revision ", run->revision,
                               " attempts ", run->attempts));
  }
  // Nothing may fire while the engines are torn down.
  for (auto& p : processes_) p->inc->alive = false;
  client_inc_->alive = false;
  result.violation = world_.violation();
  result.runs = static_cast<int>(runs_.size());
  result.operations = faults_.operations;
  result.crashes = crashes_;
  result.most_held = most_held_;
  result.crashes_holding_many = crashes_holding_many_;
  result.faults = faults_.faults;
  result.signals_kept = faults_.signals_kept;
  result.signals_resolved = faults_.signals_resolved;
  result.schedule_runs = schedule_runs_;
  result.child_runs = children_;
  result.keyed_leases = faults_.keyed_leases;
  result.leases_ended = faults_.leases_ended;
  result.over_limit = faults_.over_limit;
  result.history = std::move(world_.history());
  return result;
}

}  // namespace

SimResult RunSimulation(const SimOptions& options) {
#ifndef RUNLOOM_TESTING
  if (!options.bugs.empty()) {
    SimResult r;
    r.violation = "injected bugs need a RUNLOOM_TESTING build (make test-asan builds one)";
    return r;
  }
#endif
  SetInjectedBugs(options.bugs);
  SimResult r;
  {
    Sim sim(options);
    r = sim.Run();
  }
  SetInjectedBugs({});
  return r;
}

}  // namespace runloom::sim
