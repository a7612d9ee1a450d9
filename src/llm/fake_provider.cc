#include "llm/fake_provider.h"

#include "core/digest.h"
#include "core/duration.h"
#include "core/status_macros.h"

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace runloom {
namespace {

constexpr std::array<const char*, 32> kWords = {
    "amber",  "basin",   "cobalt", "delta",  "ember",  "fjord",  "garnet",  "harbor",
    "indigo", "juniper", "kelp",   "lumen",  "meadow", "nectar", "onyx",    "prairie",
    "quartz", "river",   "sierra", "tundra", "umber",  "violet", "willow",  "xenon",
    "yarrow", "zephyr",  "alpine", "breeze", "cedar",  "dune",   "estuary", "falcon"};
constexpr int kMinWords = 6;
constexpr int kWordSpread = 6;  // 6..11 pseudo-words per reply
constexpr int kEchoWords = 5;
constexpr int kMaxScore = 100;
constexpr uint64_t kMaxHiddenLimit = 1'000'000;

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h = (h ^ c) * 0x100000001b3ULL;
  }
  return h;
}

// splitmix64's finalizer: a well-mixed 64-bit value from any input.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A number in [0, 1) from the top 53 bits of `h`.
double Unit(uint64_t h) { return static_cast<double>(h >> 11) / static_cast<double>(1ULL << 53); }

struct FakeOptions {
  absl::Duration latency = absl::ZeroDuration();
  absl::Duration chunk_interval = absl::ZeroDuration();  // streamed: between pieces
  int64_t fail_times = 0;
  int64_t rate_limit_times = 0;
  std::optional<nlohmann::json> response;
  // Scripted agent turns (`turns:`): turn k (0-based: the assistant
  // messages already in the history) answers turns[k]; past the list, the
  // generated reply. Checked by CheckTurns.
  nlohmann::json turns = nlohmann::json::array();
};

// `turns: [{tool_calls: [{name, arguments}]}, {text: "..."}]`. An argument
// that is a string is sent as the model's raw text (so a test can script
// arguments that are not JSON); any other value as its JSON text.
absl::Status CheckTurns(const nlohmann::json& turns) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "llm step: fake.turns ", what,
        "; write turns: [{tool_calls: [{name: search, arguments: {q: x}}]}, {text: done}]"));
  };
  if (!turns.is_array()) return bad("must be a list");
  for (const nlohmann::json& turn : turns) {
    if (!turn.is_object()) return bad("has an entry that is not a mapping");
    for (const auto& [key, value] : turn.items()) {
      if (key == "text") {
        if (!value.is_string()) return bad("has a text that is not a string");
      } else if (key == "tool_calls") {
        if (!value.is_array()) return bad("has tool_calls that are not a list");
        for (const nlohmann::json& call : value) {
          if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) {
            return bad("has a tool call without a name");
          }
          for (const auto& [ck, cv] : call.items()) {
            if (ck != "name" && ck != "arguments") {
              return bad(absl::StrCat("has a tool call with unknown key '", ck,
                                      "' (allowed: name, arguments)"));
            }
          }
        }
      } else {
        return bad(absl::StrCat("has unknown key '", key, "' (allowed: text, tool_calls)"));
      }
    }
  }
  return absl::OkStatus();
}

// The index of the scripted turn for `request`, if the script has one.
std::optional<size_t> ScriptedTurn(const FakeOptions& options, const LlmRequest& request) {
  size_t turn = 0;
  for (const LlmMessage& m : request.history) turn += m.role == "assistant" ? 1 : 0;
  if (turn < options.turns.size()) return turn;
  return std::nullopt;
}

void ApplyScriptedTurn(const nlohmann::json& turn, size_t turn_index, LlmResponse& response) {
  response.text = turn.value("text", "");
  if (!turn.contains("tool_calls")) return;
  for (const nlohmann::json& call : turn["tool_calls"]) {
    const nlohmann::json args = call.value("arguments", nlohmann::json::object());
    response.tool_calls.push_back(
        {.id = absl::StrCat("call_", turn_index + 1, "_", response.tool_calls.size()),
         .name = call["name"].get<std::string>(),
         .arguments = args.is_string()
                          ? args.get<std::string>()
                          : args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
  }
}

bool IsTemplate(const nlohmann::json& v) {
  return v.is_string() && v.get_ref<const std::string&>().find("{{") != std::string::npos;
}

absl::Status OptionError(const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("llm step: fake.", key, " ", what));
}

absl::StatusOr<int64_t> ReadCount(const std::string& key, const nlohmann::json& v) {
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    return v.get<int64_t>();
  }
  if (v.is_string()) {
    // A resolved template may arrive as a string of digits.
    const std::string& s = v.get_ref<const std::string&>();
    if (!s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        })) {
      return std::stoll(s);
    }
  }
  return OptionError(key, absl::StrCat("must be a non-negative integer, got ", v.dump()));
}

// Reads the `fake:` block. With `unresolved`, template strings are skipped.
absl::StatusOr<FakeOptions> ParseOptions(const nlohmann::json& options, bool unresolved) {
  FakeOptions out;
  if (options.is_null()) {
    return out;
  }
  if (!options.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "llm step: fake must be a map of options (latency, chunk_interval, fail_times, "
        "rate_limit_times, response, turns), got ",
        options.dump()));
  }
  for (const auto& [key, value] : options.items()) {
    if (key == "response") {
      out.response = value;
      continue;
    }
    if (key == "turns") {
      RUNLOOM_RETURN_IF_ERROR(CheckTurns(value));
      out.turns = value;
      continue;
    }
    if (unresolved && IsTemplate(value)) {
      continue;
    }
    if (key == "latency" || key == "chunk_interval") {
      if (!value.is_string()) {
        return OptionError(key, "must be a duration such as \"250ms\" or \"2s\"");
      }
      auto d = ParseDuration(value.get_ref<const std::string&>());
      if (!d.ok()) {
        return OptionError(key, std::string(d.status().message()));
      }
      (key == "latency" ? out.latency : out.chunk_interval) = *d;
    } else if (key == "fail_times") {
      RUNLOOM_ASSIGN_OR_RETURN(out.fail_times, ReadCount(key, value));
    } else if (key == "rate_limit_times") {
      RUNLOOM_ASSIGN_OR_RETURN(out.rate_limit_times, ReadCount(key, value));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "llm step: unknown key 'fake.", key,
          "'; allowed keys under fake: chunk_interval, fail_times, latency, rate_limit_times, "
          "response, turns"));
    }
  }
  return out;
}

std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> words;
  std::string current;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      if (!current.empty()) {
        words.push_back(std::move(current));
        current.clear();
      }
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) {
    words.push_back(std::move(current));
  }
  return words;
}

// `text` cut into word pieces, each word with the whitespace after it (the
// first piece also takes any leading whitespace): they concatenate to
// `text`.
std::vector<std::string> WordPieces(const std::string& text) {
  std::vector<std::string> pieces;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) ++i;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) == 0) ++i;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) ++i;
    pieces.push_back(text.substr(start, i - start));
  }
  return pieces;
}

// Waits until `until` through ctx: kCancelled on a stop, kDeadlineExceeded
// when the step's deadline comes first.
absl::Status WaitUntil(StepContext& ctx, absl::Time until, absl::Duration latency) {
  const absl::Time deadline = ctx.deadline();
  if (!ctx.SleepUntil(std::min(until, deadline))) {
    return absl::CancelledError("llm call to fake provider cancelled: the step was stopped");
  }
  if (deadline < until) {
    return absl::DeadlineExceededError(absl::StrCat("llm call to fake provider timed out: latency ",
                                                    runloom::FormatDuration(latency),
                                                    " exceeds the step deadline"));
  }
  return absl::OkStatus();
}

// Streams `text` to request.on_delta word by word: piece k of n at
// start + latency * (k + 1) / n + chunk_interval * k.
absl::Status StreamPieces(StepContext& ctx, const LlmRequest& request, const std::string& text,
                          absl::Duration latency, absl::Duration chunk_interval) {
  const std::vector<std::string> pieces = WordPieces(text);
  const absl::Time start = ctx.clock()->Now();
  const int64_t n = static_cast<int64_t>(pieces.size());
  const absl::Duration total = latency + chunk_interval * std::max<int64_t>(0, n - 1);
  if (n == 0 && latency > absl::ZeroDuration()) {  // no text (tool calls only)
    return WaitUntil(ctx, start + latency, latency);
  }
  for (int64_t k = 0; k < n; ++k) {
    const absl::Duration at = latency * (k + 1) / n + chunk_interval * k;
    if (at > absl::ZeroDuration()) RUNLOOM_RETURN_IF_ERROR(WaitUntil(ctx, start + at, total));
    if (request.on_delta) request.on_delta(pieces[static_cast<size_t>(k)]);
  }
  return absl::OkStatus();
}

// Digest byte `i` (0..31) of the lower-case hex digest.
int DigestByte(const std::string& hex, size_t i) {
  return std::stoi(hex.substr(i * 2, 2), nullptr, 16);
}

// The deterministic reply text, cut to fit request.max_tokens.
std::string GenerateText(const LlmRequest& request, const std::string& hex) {
  std::vector<std::string> words;
  words.push_back("[fake]");
  std::vector<std::string> prompt_words = SplitWords(request.prompt);
  for (size_t i = 0; i < prompt_words.size() && i < kEchoWords; ++i) {
    words.push_back(prompt_words[i]);
  }
  words.push_back("->");
  const int count = kMinWords + DigestByte(hex, 0) % kWordSpread;
  for (int i = 0; i < count; ++i) {
    words.push_back(kWords[DigestByte(hex, 1 + i) % kWords.size()]);
  }
  if (request.max_tokens.has_value()) {
    // The most words w with round(w * 4 / 3) <= max_tokens; at least one.
    const int64_t max_words = std::max<int64_t>(1, (*request.max_tokens * 3 + 1) / 4);
    if (static_cast<int64_t>(words.size()) > max_words) {
      words.resize(static_cast<size_t>(max_words));
    }
  }
  return absl::StrJoin(words, " ");
}

}  // namespace

absl::Status FakeLlmProvider::ValidateOptions(const nlohmann::json& options) const {
  return ParseOptions(options, /*unresolved=*/true).status();
}

FakeLlmProvider::Admission FakeLlmProvider::Enter(const LlmRequest& request, int attempt) {
  const uint64_t h = Mix(options_.seed ^ Fnv1a(request.system + "\x1f" + request.prompt) ^
                         (static_cast<uint64_t>(attempt) * 0x9e3779b97f4a7c15ULL));
  Admission out;
  out.latency = options_.latency + options_.latency_jitter * Unit(h);
  runloom::MutexLock l(&mu_);
  ++in_flight_;
  if (hidden_limit_ > 0 && in_flight_ > hidden_limit_) {
    out.latency = absl::ZeroDuration();
    out.status = absl::ResourceExhaustedError(
        absl::StrCat("429 Too Many Requests from fake provider (", in_flight_ - 1,
                     " calls in flight, its limit is ", hidden_limit_, ")"));
    RateLimitTelemetry t = TelemetryLocked(l);
    t.remaining_requests = 0;
    t.retry_after = options_.retry_after;
    AttachRateLimit(out.status, t);
    return out;
  }
  if (options_.error_rate > 0 && Unit(Mix(h)) < options_.error_rate) {
    out.status = absl::UnavailableError(
        absl::StrCat("503 Service Unavailable from fake provider (simulated error rate ",
                     options_.error_rate, ")"));
    return out;
  }
  if (options_.advertise) out.telemetry = TelemetryLocked(l);
  return out;
}

RateLimitTelemetry FakeLlmProvider::TelemetryLocked(const runloom::MutexLock&) const {
  RateLimitTelemetry t;
  if (hidden_limit_ <= 0) return t;
  // The per-minute rate K calls in flight sustain at the mean latency.
  const double mean = absl::ToDoubleSeconds(options_.latency + options_.latency_jitter / 2);
  if (mean > 0) {
    t.limit_requests = std::llround(hidden_limit_ * 60.0 / mean);
    t.remaining_requests = std::llround(std::max(0, hidden_limit_ - in_flight_) * 60.0 / mean);
  }
  return t;
}

void FakeLlmProvider::Leave() {
  runloom::MutexLock l(&mu_);
  --in_flight_;
}

void FakeLlmProvider::SetHiddenLimit(int limit) {
  runloom::MutexLock l(&mu_);
  hidden_limit_ = limit;
}

int FakeLlmProvider::in_flight() const {
  runloom::MutexLock l(&mu_);
  return in_flight_;
}

absl::StatusOr<LlmResponse> FakeLlmProvider::Complete(StepContext& ctx, const LlmRequest& request) {
  RUNLOOM_ASSIGN_OR_RETURN(FakeOptions options, ParseOptions(request.options, false));
  Admission admission = Enter(request, ctx.attempt());
  absl::Cleanup leave = [this] { Leave(); };
  // A 429 is answered at once: the provider did no work.
  if (absl::IsResourceExhausted(admission.status)) return admission.status;
  const absl::Duration latency = options.latency + admission.latency;
  absl::Status failure = admission.status;
  const int64_t attempt = ctx.attempt();
  if (failure.ok() && attempt <= options.fail_times) {
    failure =
        absl::UnavailableError(absl::StrCat("fake provider unavailable (simulated outage, attempt ",
                                            attempt, " of ", options.fail_times, " failing)"));
  } else if (failure.ok() && attempt <= options.fail_times + options.rate_limit_times) {
    failure = absl::ResourceExhaustedError(absl::StrCat(
        "429 Too Many Requests from fake provider (simulated rate limit, attempt ", attempt, ")"));
  }
  // A failing or unstreamed call waits its whole latency first; a streamed
  // reply spreads it over its pieces (below).
  if ((!failure.ok() || !request.stream) && latency > absl::ZeroDuration()) {
    RUNLOOM_RETURN_IF_ERROR(WaitUntil(ctx, ctx.clock()->Now() + latency, latency));
  }
  if (!failure.ok()) return failure;

  LlmResponse response;
  response.model = request.model;
  if (std::optional<size_t> turn = ScriptedTurn(options, request); turn.has_value()) {
    ApplyScriptedTurn(options.turns[*turn], *turn, response);
  } else if (options.response.has_value()) {
    response.text =
        options.response->is_string()
            ? options.response->get<std::string>()
            : options.response->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    const std::string hex = Sha256Hex(request.system + "\x1f" + request.prompt);
    std::string text = GenerateText(request, hex);
    if (request.json_mode) {
      nlohmann::json object = {{"summary", text},
                               {"approved", (DigestByte(hex, 31) & 1) == 1},
                               {"score", DigestByte(hex, 30) % (kMaxScore + 1)}};
      text = object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    response.text = std::move(text);
  }
  std::string full_prompt =
      request.system.empty() ? request.prompt : request.system + "\n" + request.prompt;
  // An agent's later turns send the conversation so far: it counts too.
  for (const LlmMessage& m : request.history) {
    absl::StrAppend(&full_prompt, "\n", m.text);
    for (const LlmToolCall& c : m.tool_calls) absl::StrAppend(&full_prompt, " ", c.arguments);
  }
  response.usage.prompt_tokens = CountTokens(full_prompt);
  std::string completion = response.text;
  for (const LlmToolCall& c : response.tool_calls) {
    absl::StrAppend(&completion, " ", c.name, " ", c.arguments);
  }
  response.usage.completion_tokens = CountTokens(completion);
  response.rate_limit = admission.telemetry;
  if (request.stream) {
    RUNLOOM_RETURN_IF_ERROR(
        StreamPieces(ctx, request, response.text, latency, options.chunk_interval));
  }
  return response;
}

std::shared_ptr<LlmProvider> NewFakeLlmProvider() { return std::make_shared<FakeLlmProvider>(); }

absl::StatusOr<FakeProviderOptions> ParseFakeProviderOptions(const nlohmann::json& config) {
  FakeProviderOptions out;
  if (config.is_null()) return out;
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fake provider: options must be a map, got ", config.dump()));
  }
  auto error = [](const std::string& key, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("fake provider: ", key, " ", what));
  };
  for (const auto& [key, value] : config.items()) {
    if (key == "latency" || key == "latency_jitter" || key == "retry_after") {
      absl::StatusOr<absl::Duration> d = value.is_string()
                                             ? ParseDuration(value.get_ref<const std::string&>())
                                             : absl::InvalidArgumentError("is not a string");
      if (!d.ok() || *d < absl::ZeroDuration()) {
        return error(key, "must be a duration such as \"250ms\" or \"2s\"");
      }
      (key == "latency"          ? out.latency
       : key == "latency_jitter" ? out.latency_jitter
                                 : out.retry_after) = *d;
    } else if (key == "error_rate") {
      if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 1) {
        return error(key, absl::StrCat("must be a number from 0 to 1, got ", value.dump()));
      }
      out.error_rate = value.get<double>();
    } else if (key == "hidden_limit") {
      if (!value.is_number_unsigned() || value.get<uint64_t>() > kMaxHiddenLimit) {
        return error(key, absl::StrCat("must be an integer from 0 to ", kMaxHiddenLimit, ", got ",
                                       value.dump()));
      }
      out.hidden_limit = static_cast<int>(value.get<uint64_t>());
    } else if (key == "seed") {
      if (!value.is_number_unsigned()) {
        return error(key, absl::StrCat("must be a non-negative integer, got ", value.dump()));
      }
      out.seed = value.get<uint64_t>();
    } else if (key == "advertise") {
      if (!value.is_boolean()) return error(key, "must be true or false");
      out.advertise = value.get<bool>();
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("fake provider: unknown option '", key,
                       "'; allowed: advertise, error_rate, hidden_limit, latency, "
                       "latency_jitter, retry_after, seed"));
    }
  }
  return out;
}

std::shared_ptr<FakeLlmProvider> NewFakeLlmProvider(FakeProviderOptions options) {
  return std::make_shared<FakeLlmProvider>(options);
}

}  // namespace runloom
