// The noop, sleep and fail step kinds.
#include "runloom/workflow.h"

#include "core/duration.h"
#include "core/status_macros.h"
#include "steps/builtin_steps.h"
#include "steps/internal/config.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

namespace runloom {
namespace {

using steps_internal::ConfigReader;

class NoopStep final : public StepKind {
 public:
  absl::Duration DefaultTimeout() const override { return absl::InfiniteDuration(); }  // ends at once
  absl::Status Validate(const StepDef& def) const override {
    return Parse(def.config, /*unresolved=*/true).status();
  }

  absl::StatusOr<StepOutput> Execute(StepContext& /*ctx*/, const nlohmann::json& config) override {
    StepOutput out;
    RUNLOOM_ASSIGN_OR_RETURN(out.output, Parse(config, /*unresolved=*/false));
    return out;
  }

 private:
  static absl::StatusOr<nlohmann::json> Parse(const nlohmann::json& config, bool unresolved) {
    ConfigReader r("noop", config, unresolved);
    RUNLOOM_RETURN_IF_ERROR(r.CheckKeys({"output"}));
    if (!r.Has("output") || r.Deferred("output")) {
      return nlohmann::json::object();
    }
    const nlohmann::json& output = r.Get("output");
    if (!output.is_object()) {
      return r.Error("output", absl::StrCat("must be a map (the step's JSON object output), got ",
                                            output.dump()));
    }
    return output;
  }
};

class SleepStep final : public StepKind {
 public:
  // Bounded by its own duration.
  absl::Duration DefaultTimeout() const override { return absl::InfiniteDuration(); }
  absl::Status Validate(const StepDef& def) const override {
    return Parse(def.config, /*unresolved=*/true).status();
  }

  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) override {
    RUNLOOM_ASSIGN_OR_RETURN(Length length, Parse(config, /*unresolved=*/false));
    const absl::Time start = ctx.clock()->Now();
    const absl::Time until = length.until.has_value()
                                 ? std::max(start, *length.until)
                                 : start + length.duration.value_or(absl::ZeroDuration());
    const absl::Time deadline = ctx.deadline();
    if (!ctx.SleepUntil(std::min(until, deadline))) {
      return absl::CancelledError(
          "sleep: stopped early (run cancelled, lease lost or engine "
          "stopping)");
    }
    if (deadline < until) {
      return absl::DeadlineExceededError(absl::StrCat("sleep: the step's timeout ended the ",
                                                      runloom::FormatDuration(until - start),
                                                      " sleep early"));
    }
    StepOutput out;
    out.output = {{"slept_ms", absl::ToInt64Milliseconds(ctx.clock()->Now() - start)}};
    return out;
  }

 private:
  // `duration:` or `until:` (issue 23), exactly one; each nullopt when
  // absent, or unresolved and a template.
  struct Length {
    std::optional<absl::Duration> duration;
    std::optional<absl::Time> until;
  };
  static absl::StatusOr<Length> Parse(const nlohmann::json& config, bool unresolved) {
    ConfigReader r("sleep", config, unresolved);
    RUNLOOM_RETURN_IF_ERROR(r.CheckKeys({"duration", "until"}));
    if (r.Has("duration") == r.Has("until")) {
      return r.Missing("duration",
                       "duration: 2s, or until: \"2026-12-24T18:00:00Z\" (one of the two)");
    }
    Length out;
    RUNLOOM_ASSIGN_OR_RETURN(out.duration, r.Duration("duration"));
    RUNLOOM_ASSIGN_OR_RETURN(out.until, r.Timestamp("until"));
    return out;
  }
};

struct FailConfig {
  std::string message = "failed on purpose";
  absl::StatusCode code = absl::StatusCode::kUnknown;
  std::optional<int64_t> times;
};

const std::map<std::string, absl::StatusCode>& FailClasses() {
  static const auto* const kClasses = new std::map<std::string, absl::StatusCode>{
      {"error", absl::StatusCode::kUnknown},
      {"timeout", absl::StatusCode::kDeadlineExceeded},
      {"unavailable", absl::StatusCode::kUnavailable},
      {"rate_limited", absl::StatusCode::kResourceExhausted},
      {"invalid", absl::StatusCode::kInvalidArgument},
  };
  return *kClasses;
}

class FailStep final : public StepKind {
 public:
  absl::Duration DefaultTimeout() const override { return absl::InfiniteDuration(); }  // ends at once
  absl::Status Validate(const StepDef& def) const override {
    return Parse(def.config, /*unresolved=*/true).status();
  }

  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) override {
    RUNLOOM_ASSIGN_OR_RETURN(FailConfig c, Parse(config, /*unresolved=*/false));
    if (c.times.has_value() && ctx.attempt() > *c.times) {
      StepOutput out;
      out.output = {{"attempts", ctx.attempt()}};
      return out;
    }
    return absl::Status(c.code, c.message);
  }

 private:
  static absl::StatusOr<FailConfig> Parse(const nlohmann::json& config, bool unresolved) {
    ConfigReader r("fail", config, unresolved);
    RUNLOOM_RETURN_IF_ERROR(r.CheckKeys({"message", "class", "times"}));
    FailConfig c;
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> message, r.String("message"));
    if (message.has_value()) {
      c.message = *message;
    }
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> cls, r.String("class"));
    if (cls.has_value() && !r.Deferred("class")) {
      auto it = FailClasses().find(*cls);
      if (it == FailClasses().end()) {
        return r.Error("class", absl::StrCat("is '", *cls,
                                             "'; allowed: error, timeout, unavailable, "
                                             "rate_limited, invalid"));
      }
      c.code = it->second;
    }
    RUNLOOM_ASSIGN_OR_RETURN(c.times, r.Int("times", 0, 1'000'000));
    return c;
  }
};

}  // namespace

std::shared_ptr<StepKind> NewNoopStep() { return std::make_shared<NoopStep>(); }
std::shared_ptr<StepKind> NewSleepStep() { return std::make_shared<SleepStep>(); }
std::shared_ptr<StepKind> NewFailStep() { return std::make_shared<FailStep>(); }

}  // namespace runloom
