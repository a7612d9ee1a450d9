#include "llm/provider.h"

#include "core/check.h"
#include "llm/config.h"
#include "llm/fake_provider.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <cctype>
#include <string>
#include <utility>
#include <vector>

namespace runloom {

void LlmProviderRegistry::Register(const std::string& prefix,
                                   std::shared_ptr<LlmProvider> provider) {
  RUNLOOM_CHECK(!prefix.empty()) << "an LLM provider needs a model prefix";
  RUNLOOM_CHECK(provider != nullptr) << "null LLM provider for '" << prefix << "'";
  runloom::MutexLock l(&mu_);
  providers_[prefix] = std::move(provider);
}

void LlmProviderRegistry::RegisterModel(const std::string& alias, ModelRoute route) {
  RUNLOOM_CHECK(!alias.empty()) << "a model route needs an alias";
  RUNLOOM_CHECK(route.provider != nullptr) << "null LLM provider for model '" << alias << "'";
  runloom::MutexLock l(&mu_);
  models_[alias] = std::move(route);
}

absl::StatusOr<ModelRoute> LlmProviderRegistry::Route(const std::string& model) const {
  runloom::MutexLock l(&mu_);
  if (auto it = models_.find(model); it != models_.end()) return it->second;
  const std::string* best = nullptr;
  for (const auto& [prefix, provider] : providers_) {
    if (model.compare(0, prefix.size(), prefix) == 0 &&
        (best == nullptr || prefix.size() >= best->size())) {
      best = &prefix;
    }
  }
  if (best == nullptr) {
    std::vector<std::string> aliases;
    for (const auto& [alias, route] : models_) aliases.push_back(alias);
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", model, "' is not configured; ",
        aliases.empty() ? std::string("no model aliases are configured (declare it under "
                                      "`models:` in the --config file)")
                        : absl::StrCat("configured aliases: ", absl::StrJoin(aliases, ", ")),
        ", or use model: fake"));
  }
  ModelRoute route;
  route.provider = providers_.at(*best);
  route.provider_name = *best;
  route.model = model;
  return route;
}

absl::StatusOr<std::shared_ptr<LlmProvider>> LlmProviderRegistry::Resolve(
    const std::string& model) const {
  absl::StatusOr<ModelRoute> route = Route(model);
  if (!route.ok()) return route.status();
  return route->provider;
}

int64_t CostMicros(const ModelRoute& route, const LlmUsage& usage) {
  return CallCostMicros(route.input_micros_per_1k, route.output_micros_per_1k, usage.prompt_tokens,
                        usage.completion_tokens);
}

std::shared_ptr<LlmProviderRegistry> LlmProviderRegistry::WithFake() {
  auto registry = std::make_shared<LlmProviderRegistry>();
  registry->Register("fake", NewFakeLlmProvider());
  return registry;
}

namespace {

// A count carried as a status payload: set on an error only; read back as
// `fallback` when absent or unreadable.
absl::Status WithCount(absl::Status s, const char* payload, int n) {
  if (!s.ok()) s.SetPayload(payload, absl::Cord(absl::StrCat(n)));
  return s;
}

int CountOf(const absl::Status& s, const char* payload, int fallback) {
  int n = fallback;
  if (auto p = s.GetPayload(payload)) {
    if (!absl::SimpleAtoi(std::string(*p), &n) || n < 0) n = fallback;
  }
  return n;
}

}  // namespace

absl::Status WithRequests(absl::Status s, int requests) {
  return WithCount(std::move(s), kLlmRequestsPayload, requests);
}

int RequestsOf(const absl::Status& s) { return CountOf(s, kLlmRequestsPayload, 1); }

absl::Status WithMaybeBilled(absl::Status s, int requests) {
  if (requests <= 0) return s;
  return WithCount(std::move(s), kLlmMaybeBilledPayload, requests);
}

int MaybeBilledOf(const absl::Status& s) { return CountOf(s, kLlmMaybeBilledPayload, 0); }

int64_t CountTokens(std::string_view text) {
  int64_t words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!space && !in_word) {
      ++words;
    }
    in_word = !space;
  }
  // words * 4 / 3 rounded to nearest: the remainder is 0, 1 or 2 thirds.
  return (words * 4 + 1) / 3;
}

}  // namespace runloom
