#include "runloom/step.h"

#include "core/check.h"
#include "steps/builtin_steps.h"

namespace runloom {

ErrorClass ErrorClassOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kDeadlineExceeded:
      return ErrorClass::kTimeout;
    case absl::StatusCode::kUnavailable:
      return ErrorClass::kUnavailable;
    case absl::StatusCode::kResourceExhausted:
      return ErrorClass::kRateLimited;
    case absl::StatusCode::kInvalidArgument:
      return ErrorClass::kInvalid;
    case absl::StatusCode::kCancelled:
      return ErrorClass::kCancelled;
    default:
      return ErrorClass::kError;
  }
}

void StepRegistry::Register(const std::string& name, std::shared_ptr<StepKind> kind) {
  // loop and parallel are graph shapes the engine runs itself, not kinds.
  RUNLOOM_CHECK(name != "loop" && name != "parallel")
      << "step kind '" << name << "' is reserved by the engine";
  RUNLOOM_CHECK(!name.empty()) << "a step kind needs a name";
  RUNLOOM_CHECK(kind != nullptr) << "null StepKind registered as '" << name << "'";
  runloom::MutexLock l(&mu_);
  kinds_[name] = std::move(kind);
}

std::shared_ptr<StepKind> StepRegistry::Find(const std::string& name) const {
  runloom::MutexLock l(&mu_);
  auto it = kinds_.find(name);
  return it == kinds_.end() ? nullptr : it->second;
}

std::vector<std::string> StepRegistry::Names() const {
  runloom::MutexLock l(&mu_);
  std::vector<std::string> names;
  names.reserve(kinds_.size());
  for (const auto& [name, kind] : kinds_) names.push_back(name);
  return names;
}

std::unique_ptr<StepRegistry> StepRegistry::WithLocalBuiltins() {
  auto registry = std::make_unique<StepRegistry>();
  registry->Register("exec", NewExecStep());
  registry->Register("noop", NewNoopStep());
  registry->Register("sleep", NewSleepStep());
  registry->Register("fail", NewFailStep());
  std::shared_ptr<LlmProviderRegistry> providers = LlmProviderRegistry::WithFake();
  auto caps = std::make_shared<LlmConcurrency>();
  if (absl::StatusOr<std::shared_ptr<LlmProvider>> fake = providers->Resolve("fake"); fake.ok()) {
    caps->Add("fake", fake->get(), ConcurrencyOptions{.static_cap = kFakeStaticCap});
  }
  registry->Register("llm", NewLlmStep(std::move(providers), std::move(caps)));
  return registry;
}

}  // namespace runloom
