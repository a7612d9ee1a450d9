// The llm step kind: one model call through the provider registry.
#include "runloom/workflow.h"

#include "core/bounded_json.h"
#include "core/check.h"
#include "core/status_macros.h"
#include "llm/llm_concurrency.h"
#include "steps/builtin_steps.h"
#include "steps/internal/config.h"

#include "absl/strings/str_cat.h"

#include <memory>
#include <optional>
#include <string>

namespace runloom {
namespace {

using steps_internal::ConfigReader;

constexpr char kDefaultModel[] = "fake";
constexpr int64_t kMaxTokensLimit = 1'000'000;
constexpr size_t kSnippetBytes = 200;

struct LlmCall {
  LlmRequest request;
  std::shared_ptr<LlmProvider> provider;  // null when the model is still a template
};

// Models often wrap JSON in a ```json fence; accept that.
std::string StripCodeFence(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  const size_t end = text.find_last_not_of(" \t\r\n");
  if (begin == std::string::npos) {
    return "";
  }
  std::string body = text.substr(begin, end + 1 - begin);
  if (body.rfind("```", 0) != 0 || body.size() < 6 ||
      body.compare(body.size() - 3, 3, "```") != 0) {
    return body;
  }
  const size_t first_newline = body.find('\n');
  if (first_newline == std::string::npos) {
    return body;
  }
  return body.substr(first_newline + 1, body.size() - 3 - (first_newline + 1));
}

absl::StatusOr<nlohmann::json> ParseJsonReply(const std::string& text) {
  const std::string body = StripCodeFence(text);
  const std::string snippet =
      body.size() <= kSnippetBytes ? body : absl::StrCat(body.substr(0, kSnippetBytes), "...");
  absl::StatusOr<nlohmann::json> parsed = ParseJsonBounded(body, "llm reply", StepOutputLimits());
  if (!parsed.ok()) {
    if (IsLimitError(parsed.status())) return parsed.status();
    return absl::InvalidArgumentError(
        absl::StrCat("llm reply is not a JSON object: ", snippet, " (", parsed.status().message(),
                     "); ask for a JSON object in the prompt, or use response_format: text"));
  }
  nlohmann::json value = *std::move(parsed);
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("llm reply is not a JSON object: got ", value.type_name(), " ", snippet));
  }
  return value;
}

class LlmStep final : public StepKind {
 public:
  LlmStep(std::shared_ptr<LlmProviderRegistry> providers,
          std::shared_ptr<LlmConcurrency> concurrency)
      : providers_(std::move(providers)), concurrency_(std::move(concurrency)) {
    RUNLOOM_CHECK(providers_ != nullptr) << "the llm step needs a provider registry";
  }

  absl::Status Validate(const StepDef& def) const override {
    RUNLOOM_ASSIGN_OR_RETURN(LlmCall call, Parse(def.config, /*unresolved=*/true));
    if (call.provider != nullptr) {
      return call.provider->ValidateOptions(call.request.options);
    }
    return absl::OkStatus();
  }

  LlmConcurrency* concurrency() const { return concurrency_.get(); }

  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) override {
    RUNLOOM_ASSIGN_OR_RETURN(LlmCall call, Parse(config, /*unresolved=*/false));
    // A slot under the provider's concurrency cap for the call's duration.
    LlmSlots* slots = concurrency_ ? concurrency_->SlotsFor(call.provider.get()) : nullptr;
    std::optional<LlmSlots::Slot> slot;
    if (slots != nullptr) {
      absl::StatusOr<LlmSlots::Slot> acquired = slots->Acquire(ctx);
      if (!acquired.ok()) {
        return Annotate(acquired.status(), absl::StrCat("llm model '", call.request.model, "'"));
      }
      slot.emplace(*std::move(acquired));
    }
    absl::StatusOr<LlmResponse> response = call.provider->Complete(ctx, call.request);
    if (slot) {
      slot->Finish(response.status(),
                   response.ok() ? response->rate_limit : RateLimitOf(response.status()));
    }
    if (!response.ok()) {
      return Annotate(response.status(), absl::StrCat("llm model '", call.request.model, "'"));
    }
    StepOutput out;
    out.output = {{"text", response->text},
                  {"model", response->model},
                  {"usage",
                   {{"prompt_tokens", response->usage.prompt_tokens},
                    {"completion_tokens", response->usage.completion_tokens}}}};
    if (call.request.json_mode) {
      RUNLOOM_ASSIGN_OR_RETURN(out.output["json"], ParseJsonReply(response->text));
    }
    return out;
  }

 private:
  absl::StatusOr<LlmCall> Parse(const nlohmann::json& config, bool unresolved) const {
    ConfigReader r("llm", config, unresolved);
    RUNLOOM_RETURN_IF_ERROR(
        r.CheckKeys({"model", "prompt", "system", "response_format", "max_tokens", "fake"}));
    LlmCall call;
    LlmRequest& req = call.request;
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> model, r.String("model"));
    req.model = model.value_or(kDefaultModel);
    if (!r.Deferred("model")) {
      absl::StatusOr<std::shared_ptr<LlmProvider>> provider = providers_->Resolve(req.model);
      if (!provider.ok()) {
        return Annotate(provider.status(), "llm step");
      }
      call.provider = *std::move(provider);
    }
    if (!r.Has("prompt")) {
      return r.Missing("prompt", "prompt: \"Summarize {{ inputs.topic }}\"");
    }
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> prompt, r.String("prompt"));
    req.prompt = prompt.value_or("");
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> system, r.String("system"));
    req.system = system.value_or("");
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> format, r.String("response_format"));
    if (format.has_value() && !r.Deferred("response_format")) {
      if (*format != "text" && *format != "json") {
        return r.Error("response_format", absl::StrCat("is '", *format, "'; allowed: text, json"));
      }
      req.json_mode = *format == "json";
    }
    RUNLOOM_ASSIGN_OR_RETURN(req.max_tokens, r.Int("max_tokens", 1, kMaxTokensLimit));
    if (r.Has("fake")) {
      req.options = r.Get("fake");
    }
    return call;
  }

  const std::shared_ptr<LlmProviderRegistry> providers_;
  const std::shared_ptr<LlmConcurrency> concurrency_;  // null: no caps
};

}  // namespace

std::shared_ptr<StepKind> NewLlmStep(std::shared_ptr<LlmProviderRegistry> providers,
                                     std::shared_ptr<LlmConcurrency> concurrency) {
  return std::make_shared<LlmStep>(std::move(providers), std::move(concurrency));
}

LlmConcurrency* LlmConcurrencyOf(const StepRegistry& registry) {
  const auto* llm = dynamic_cast<const LlmStep*>(registry.Find("llm").get());
  return llm != nullptr ? llm->concurrency() : nullptr;
}

}  // namespace runloom
