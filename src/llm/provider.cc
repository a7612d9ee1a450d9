#include "llm/provider.h"

#include "core/check.h"
#include "llm/fake_provider.h"

#include "absl/strings/str_cat.h"

#include <cctype>

namespace runloom {

void LlmProviderRegistry::Register(const std::string& prefix,
                                   std::shared_ptr<LlmProvider> provider) {
  RUNLOOM_CHECK(!prefix.empty()) << "an LLM provider needs a model prefix";
  RUNLOOM_CHECK(provider != nullptr) << "null LLM provider for '" << prefix << "'";
  runloom::MutexLock l(&mu_);
  providers_[prefix] = std::move(provider);
}

absl::StatusOr<std::shared_ptr<LlmProvider>> LlmProviderRegistry::Resolve(
    const std::string& model) const {
  runloom::MutexLock l(&mu_);
  const std::shared_ptr<LlmProvider>* best = nullptr;
  size_t best_len = 0;
  for (const auto& [prefix, provider] : providers_) {
    if (model.compare(0, prefix.size(), prefix) == 0 && prefix.size() >= best_len) {
      best = &provider;
      best_len = prefix.size();
    }
  }
  if (best == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model,
                     "' has no provider configured (real providers come in a later issue); "
                     "use model: fake"));
  }
  return *best;
}

std::shared_ptr<LlmProviderRegistry> LlmProviderRegistry::WithFake() {
  auto registry = std::make_shared<LlmProviderRegistry>();
  registry->Register("fake", NewFakeLlmProvider());
  return registry;
}

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
