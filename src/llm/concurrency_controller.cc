#include "llm/concurrency_controller.h"

#include "core/check.h"
#include "core/log.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>

namespace runloom {
namespace {

// Reads of the report stream per tick: 5,000 reports, far more than a
// tick's; the rest waits for the next tick.
constexpr int kReadsPerTick = 5;
constexpr size_t kReportsPerRead = 1000;

// Little's law: calls in flight = arrival rate * time in the system.
int LittlesLaw(int64_t per_minute, absl::Duration latency, int min_cap) {
  const double calls = static_cast<double>(per_minute) / 60.0 * absl::ToDoubleSeconds(latency);
  return std::max(min_cap, static_cast<int>(std::lround(calls)));
}

int64_t Grown(int64_t now, int64_t before) { return now >= before ? now - before : now; }

}  // namespace

std::string DescribeCapLimits(const CapLimits& limits) {
  auto show = [](const std::optional<int>& v) { return v ? absl::StrCat(*v) : std::string("-"); };
  return absl::StrCat("aimd ", limits.aimd, ", telemetry ", show(limits.telemetry), ", pool ",
                      show(limits.pool), ", cpu ", show(limits.cpu));
}

ConcurrencyController::ConcurrencyController(std::string provider, ConcurrencyOptions options,
                                             ControllerDeps deps)
    : provider_(std::move(provider)),
      id_(deps.id.empty() ? NewControllerId() : deps.id),
      options_(options),
      deps_(std::move(deps)),
      logger_(deps_.logger != nullptr ? deps_.logger : DefaultLogger()),
      task_(deps_.clock, options_.tick, [this] { Tick(); }),
      aimd_(std::clamp(options_.static_cap, options_.min_cap, options_.max_cap)) {
  RUNLOOM_CHECK(deps_.clock != nullptr && deps_.board != nullptr)
      << "ConcurrencyController needs a clock and a cap board";
  RUNLOOM_CHECK(options_.min_cap >= 1 && options_.min_cap <= options_.max_cap)
      << "concurrency caps: need 1 <= min_cap <= max_cap";
  last_.aimd = last_.cap = static_cast<int>(aimd_);
}

void ConcurrencyController::Observe(const CallOutcome& outcome) {
  const absl::Time now = deps_.clock->Now();
  std::optional<int> cut_to;
  {
    runloom::MutexLock l(&mu_);
    SenseReport& w = window_;
    if (outcome.waited) w.waited = true;
    const double weight = options_.error_ewma_weight;
    switch (outcome.kind) {
      case CallOutcome::Kind::kOk:
        ++w.ok;
        w.latency_sum += outcome.latency;
        local_latency_ = local_latency_ ? *local_latency_ * (1 - weight) + outcome.latency * weight
                                        : outcome.latency;
        break;
      case CallOutcome::Kind::kRateLimited:
        ++w.rate_limited;
        break;
      case CallOutcome::Kind::kError:
        ++w.errors;
        break;
    }
    if (outcome.telemetry.limit_requests) w.limit_requests = outcome.telemetry.limit_requests;
    // One cut per overshoot: calls sent before the last cut were sent under
    // the old cap, and their 429s say nothing about the new one.
    if (outcome.kind == CallOutcome::Kind::kRateLimited && outcome.started >= last_cut_) {
      const int in_force = last_.cap;
      // A 429 at cap C says the limit is below C; its headers may say where.
      const int below = std::max(options_.min_cap, in_force - 1);
      double next = std::floor(in_force * options_.rate_limit_backoff);
      if (outcome.telemetry.limit_requests) {
        next = below;
        if (local_latency_) {
          next = std::min<double>(
              next, LittlesLaw(*outcome.telemetry.limit_requests, *local_latency_, 1));
        }
      }
      const int cut = std::max(options_.min_cap, std::min(in_force, static_cast<int>(next)));
      last_cut_ = now;
      w.cut = w.cut ? std::min(*w.cut, cut) : cut;
      w.cut_from = w.cut_from ? std::max(*w.cut_from, in_force) : in_force;
      if (leading_) {
        // Remembered for telemetry_ttl, so AIMD does not probe straight back.
        aimd_ = std::min<double>(aimd_, cut);
        ceiling_ = below;
        ceiling_at_ = now;
      }
      if (cut != in_force) {
        Log(logger_, LogLevel::kInfo, "llm concurrency: provider ", provider_, " cap ", in_force,
            " -> ", cut, " at once (429: ", outcome.telemetry.ToString(), ")");
        last_.cap = cut;
        if (leading_) last_.aimd = static_cast<int>(aimd_);
        cut_to = cut;
      }
    }
  }
  if (cut_to) {
    NoteBoard(deps_.board->Cut(provider_, *cut_to, options_.ttl), "cut the cap on", /*tick=*/false);
  }
}

std::optional<int> ConcurrencyController::TelemetryLimitLocked(const runloom::MutexLock&,
                                                               absl::Time now) const {
  std::optional<int> out;
  if (ceiling_ && now - ceiling_at_ <= options_.telemetry_ttl) out = ceiling_;
  if (telemetry_rpm_ && latency_ewma_ && now - telemetry_at_ <= options_.telemetry_ttl) {
    const int advertised = LittlesLaw(*telemetry_rpm_, *latency_ewma_, options_.min_cap);
    out = out ? std::min(*out, advertised) : advertised;
  }
  return out;
}

SenseReport ConcurrencyController::TakeReport() {
  // Read outside mu_: each takes its own lock (the slots', the pool's).
  const std::optional<PoolUse> pool =
      deps_.pool ? std::optional<PoolUse>(deps_.pool()) : std::nullopt;
  const std::optional<double> busy = deps_.cpu != nullptr ? deps_.cpu->Busy() : std::nullopt;
  const int in_flight = deps_.in_flight ? deps_.in_flight() : 0;
  runloom::MutexLock l(&mu_);
  SenseReport r = std::exchange(window_, SenseReport{});
  r.reporter = id_;
  r.in_flight = in_flight;
  r.cpu_busy = busy;
  if (pool.has_value() && pool->size > 0 && !pool_baseline_) {
    // The first reading is the baseline: what the pool did before this
    // controller ran says nothing about the cap.
    r.pool_size = pool->size;
    pool_seen_ = *pool;
    pool_baseline_ = true;
  } else if (pool.has_value() && pool->size > 0) {
    r.pool_size = pool->size;
    r.pool_acquires = Grown(pool->acquires, pool_seen_.acquires);
    r.pool_waited = Grown(pool->waited, pool_seen_.waited);
    r.pool_exhausted = Grown(pool->exhausted, pool_seen_.exhausted);
    r.pool_wait = pool->wait >= pool_seen_.wait ? pool->wait - pool_seen_.wait : pool->wait;
    pool_seen_ = *pool;
  }
  return r;
}

CapLimits ConcurrencyController::DecideLocked(const runloom::MutexLock& l,
                                              const std::vector<SenseReport>& reports,
                                              absl::Time now) {
  int64_t ok = 0;
  int64_t rate_limited = 0;
  int64_t errors = 0;
  bool waited = false;
  absl::Duration latency_sum = absl::ZeroDuration();
  bool any_pool = false;
  int64_t acquires = 0;
  int64_t acquires_waited = 0;
  int64_t exhausted = 0;
  std::optional<double> busiest;
  // The newest report of each process: its calls in flight now.
  absl::flat_hash_map<std::string, int> in_flight_of;
  for (const SenseReport& r : reports) {
    ok += r.ok;
    rate_limited += r.rate_limited;
    errors += r.errors;
    waited = waited || r.waited;
    latency_sum += r.latency_sum;
    if (r.limit_requests) {
      telemetry_rpm_ = r.limit_requests;
      telemetry_at_ = now;
    }
    if (r.cut) {
      // Another process (or this one) cut at once on a 429.
      aimd_ = std::min<double>(aimd_, *r.cut);
      if (r.cut_from) {
        ceiling_ = std::max(options_.min_cap, *r.cut_from - 1);
        ceiling_at_ = now;
      }
    }
    if (r.pool_size > 0) {
      any_pool = true;
      acquires += r.pool_acquires;
      acquires_waited += r.pool_waited;
      exhausted += r.pool_exhausted;
    }
    if (r.cpu_busy) busiest = busiest ? std::max(*busiest, *r.cpu_busy) : *r.cpu_busy;
    in_flight_of[r.reporter] = r.in_flight;
  }
  int in_flight = 0;
  for (const auto& [reporter, n] : in_flight_of) in_flight += n;

  // The per-call EWMAs, over the tick's calls at once: n steps of weight w
  // leave (1 - w)^n of the old value.
  const double w = options_.error_ewma_weight;
  if (const int64_t n = ok + rate_limited + errors; n > 0) {
    const double keep = std::pow(1 - w, static_cast<double>(n));
    error_ewma_ =
        error_ewma_ * keep + static_cast<double>(errors) / static_cast<double>(n) * (1 - keep);
  }
  if (ok > 0) {
    const absl::Duration mean = latency_sum / ok;
    const double keep = std::pow(1 - w, static_cast<double>(ok));
    latency_ewma_ = latency_ewma_ ? *latency_ewma_ * keep + mean * (1 - keep) : mean;
  }

  if (error_ewma_ > options_.error_threshold) {
    aimd_ = std::max<double>(options_.min_cap, std::floor(aimd_ * options_.error_backoff));
    error_ewma_ = 0;  // judge the new cap on fresh calls
  } else if (rate_limited == 0 && waited) {
    aimd_ += options_.additive_increase;
  }

  // The pool limiter: pressure is measured on the pools, never assumed.
  if (!any_pool) {
    pool_limit_.reset();
  } else if (exhausted > 0 ||
             (acquires > 0 && static_cast<double>(acquires_waited) >
                                  options_.pool_wait_high * static_cast<double>(acquires))) {
    if (in_flight > 0) {
      int base = std::min(last_.cap, in_flight);
      if (pool_limit_) base = std::min(base, *pool_limit_);
      pool_limit_ =
          std::max(options_.min_cap, static_cast<int>(std::floor(base * options_.pool_backoff)));
    }
  } else if (pool_limit_) {
    *pool_limit_ += options_.additive_increase;
    if (*pool_limit_ > options_.max_cap) pool_limit_.reset();
  }

  std::optional<int> cpu;
  if (busiest && *busiest > options_.cpu_high) {
    cpu = std::max(options_.min_cap,
                   static_cast<int>(std::floor(in_flight * options_.cpu_high / *busiest)));
  }

  CapLimits limits;
  limits.telemetry = TelemetryLimitLocked(l, now);
  limits.pool = pool_limit_;
  limits.cpu = cpu;
  int cap = std::min(static_cast<int>(aimd_), options_.max_cap);
  for (const std::optional<int>& other : {limits.telemetry, limits.pool, limits.cpu}) {
    if (other) cap = std::min(cap, *other);
  }
  cap = std::max(cap, options_.min_cap);
  // Another limiter binds: AIMD stays within one step of it, so it probes
  // upward from there when that limiter lets go, not from far above.
  aimd_ = std::min<double>(aimd_, cap + options_.additive_increase);
  limits.aimd = static_cast<int>(aimd_);
  limits.cap = cap;
  limits.leader = true;
  limits.in_flight = in_flight;
  return limits;
}

CapLimits ConcurrencyController::Tick() {
  const absl::Time now = deps_.clock->Now();
  const SenseReport mine = TakeReport();
  // Fail-soft: a report that does not arrive is one tick of telemetry.
  // The tick's first failure, logged once at its end.
  absl::Status failed;
  const char* failed_to = "";
  auto note = [&failed, &failed_to](const absl::Status& s, const char* what) {
    if (!s.ok() && failed.ok()) {
      failed = s;
      failed_to = what;
    }
  };
  const absl::StatusOr<std::string> position = deps_.board->Report(provider_, mine);
  note(position.status(), "report to");
  const absl::StatusOr<std::string> holder = deps_.board->Lead(provider_, id_, options_.lease);
  note(holder.status(), "take the lead on");

  bool took = false;
  {
    runloom::MutexLock l(&mu_);
    const bool leading = holder.ok() && *holder == id_;
    if (holder.ok() && leading && !leading_) {
      Log(logger_, LogLevel::kInfo, "llm concurrency: provider ", provider_,
          ": this process decides the cap now (", id_, ")");
      took = true;
    } else if (holder.ok() && !leading && (leading_ || *holder != holder_)) {
      Log(logger_, LogLevel::kInfo, "llm concurrency: provider ", provider_, ": ", *holder,
          " decides the cap now");
    }
    leading_ = leading;
    if (holder.ok()) holder_ = *holder;
  }

  std::vector<SenseReport> reports;
  if (took) {
    // Start where the last leader left the cap, not from the static cap.
    absl::StatusOr<std::optional<int>> in_force = deps_.board->Read(provider_);
    // Older reports were the last leader's to read: skip them.
    std::string cursor;
    if (position.ok()) {
      cursor = *position;
    } else {
      for (int i = 0; i < kReadsPerTick; ++i) {
        absl::StatusOr<std::vector<SenseReport>> old = deps_.board->ReadReports(provider_, &cursor);
        if (!old.ok() || old->size() < kReportsPerRead) break;
      }
    }
    runloom::MutexLock l(&mu_);
    if (in_force.ok() && in_force->has_value()) {
      aimd_ = std::clamp(**in_force, options_.min_cap, options_.max_cap);
    }
    cursor_ = cursor;
  } else if (holder.ok() && *holder == id_) {
    std::string cursor;
    {
      runloom::MutexLock l(&mu_);
      cursor = cursor_;
    }
    int malformed = 0;
    for (int i = 0; i < kReadsPerTick; ++i) {
      int bad = 0;
      absl::StatusOr<std::vector<SenseReport>> more =
          deps_.board->ReadReports(provider_, &cursor, &bad);
      note(more.status(), "read the reports on");
      if (!more.ok()) break;
      malformed += bad;
      for (SenseReport& r : *more) {
        if (r.reporter != id_) reports.push_back(std::move(r));  // its own: `mine`
      }
      if (more->size() < kReportsPerRead) break;
    }
    runloom::MutexLock l(&mu_);
    cursor_ = cursor;
    if (malformed > 0 && !reports_malformed_) {
      Log(logger_, LogLevel::kWarning, "llm concurrency: provider ", provider_, ": skipped ",
          malformed, " telemetry report(s) on ", deps_.board->Describe(),
          " that do not decode (a worker of another version?)");
    }
    reports_malformed_ = reports_malformed_ || malformed > 0;
  }

  CapLimits limits;
  int before = 0;
  bool leading = false;
  {
    runloom::MutexLock l(&mu_);
    leading = leading_;
    before = last_.cap;
    if (leading) {
      reports.push_back(mine);
      limits = DecideLocked(l, reports, now);
      last_ = limits;
    }
  }
  if (leading) {
    if (limits.cap != before) {
      Log(logger_, LogLevel::kInfo, "llm concurrency: provider ", provider_, " cap ", before,
          " -> ", limits.cap, " (", DescribeCapLimits(limits), ")");
    }
    const absl::StatusOr<bool> published =
        deps_.board->Publish(provider_, id_, limits.cap, options_.ttl);
    note(published.status(), "publish the cap to");
    if (!published.ok() || !*published) {
      runloom::MutexLock l(&mu_);
      leading_ = false;
      last_.leader = limits.leader = false;
    }
  } else {
    // A follower: the cap in force is the one the leader published.
    absl::StatusOr<std::optional<int>> in_force = deps_.board->Read(provider_);
    note(in_force.status(), "read the cap on");
    runloom::MutexLock l(&mu_);
    if (in_force.ok()) {
      last_.cap = in_force->has_value() ? **in_force : std::max(1, options_.static_cap);
    }
    last_.leader = false;
    last_.in_flight = mine.in_flight;
    limits = last_;
  }
  NoteBoard(failed, failed_to, /*tick=*/true);
  if (deps_.on_tick) deps_.on_tick(limits);
  return limits;
}

void ConcurrencyController::NoteBoard(const absl::Status& s, const char* what, bool tick) {
  runloom::MutexLock l(&mu_);
  if (s.ok() && !tick) return;  // only a whole tick that succeeded says it recovered
  if (!s.ok() && !board_failing_) {
    Log(logger_, LogLevel::kWarning, "llm concurrency: provider ", provider_, ": cannot ", what,
        " ", deps_.board->Describe(), ": ", s.ToString(),
        "; executors fall back to the static cap ", options_.static_cap, " after ",
        absl::FormatDuration(options_.ttl));
  } else if (s.ok() && board_failing_) {
    Log(logger_, LogLevel::kInfo, "llm concurrency: provider ", provider_, ": ",
        deps_.board->Describe(), " answers again");
  }
  board_failing_ = !s.ok();
}

void ConcurrencyController::Start() {
  Tick();  // the first publication (or reading) now, so executors see a fresh cap
  task_.Start();
}

void ConcurrencyController::Stop() { task_.Stop(); }

CapLimits ConcurrencyController::limits() const {
  runloom::MutexLock l(&mu_);
  return last_;
}

}  // namespace runloom
