#include "llm/config.h"

#include "testing/status_matchers.h"
#include "testing/test_servers.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kFull[] = R"(
providers:
  local:
    kind: openai
    base_url: http://127.0.0.1:8000/v1/
    api_key: secret://LOCAL_KEY
    max_concurrency: 8
    connect_timeout: 2s
    timeout: 45s
    retry: {max_attempts: 5, initial_delay: 100ms, max_delay: 3s}
  claude:
    kind: anthropic
  offline:
    kind: fake
models:
  writer:
    provider: local
    model: qwen2.5-7b-instruct
    input_price_per_1k: 0.0005
    output_price_per_1k: 0.0015
    max_tokens: 1024
  reviewer: {provider: claude, model: claude-3-5-haiku-latest, input_price_per_1k: 0.8}
  cheap: {provider: offline}
tenants:
  acme: {budget: 50}
  tiny: {budget: 0.25}
)";

absl::Status ErrorOf(const std::string& yaml) { return ParseLlmConfig(yaml, "cfg.yaml").status(); }

TEST(LlmConfigTest, ReadsProvidersModelsAndTenants) {
  absl::StatusOr<LlmConfig> c = ParseLlmConfig(kFull, "cfg.yaml");
  ASSERT_OK(c);
  ASSERT_EQ(c->providers.size(), 3u);
  const ProviderConfig& local = c->providers.at("local");
  EXPECT_EQ(local.kind, ProviderKind::kOpenAi);
  EXPECT_EQ(local.base_url, "http://127.0.0.1:8000/v1");  // trailing '/' dropped
  EXPECT_EQ(local.api_key_secret, "LOCAL_KEY");
  EXPECT_EQ(local.max_concurrency, 8);
  EXPECT_EQ(local.connect_timeout, absl::Seconds(2));
  EXPECT_EQ(local.timeout, absl::Seconds(45));
  EXPECT_EQ(local.retry.max_attempts, 5);
  EXPECT_EQ(local.retry.initial_delay, absl::Milliseconds(100));
  EXPECT_EQ(local.retry.max_delay, absl::Seconds(3));
  const ProviderConfig& claude = c->providers.at("claude");
  EXPECT_EQ(claude.kind, ProviderKind::kAnthropic);
  EXPECT_EQ(claude.base_url, "https://api.anthropic.com/v1");
  EXPECT_EQ(claude.api_key_secret, "");
  EXPECT_EQ(claude.retry.max_attempts, ProviderRetry{}.max_attempts);

  const ModelConfig& writer = c->models.at("writer");
  EXPECT_EQ(writer.provider, "local");
  EXPECT_EQ(writer.model, "qwen2.5-7b-instruct");
  EXPECT_EQ(writer.input_micros_per_1k, 500);
  EXPECT_EQ(writer.output_micros_per_1k, 1500);
  EXPECT_EQ(writer.max_tokens, 1024);
  EXPECT_EQ(c->models.at("reviewer").input_micros_per_1k, 800000);
  EXPECT_EQ(c->models.at("reviewer").output_micros_per_1k, 0);
  EXPECT_EQ(c->models.at("cheap").model, "cheap");  // default: the alias
  EXPECT_EQ(c->models.at("cheap").max_tokens, std::nullopt);

  EXPECT_EQ(c->tenants.at("acme").budget_micros, 50'000'000);
  EXPECT_EQ(c->tenants.at("tiny").budget_micros, 250'000);
}

TEST(LlmConfigTest, EmptyFileConfiguresNothing) {
  absl::StatusOr<LlmConfig> c = ParseLlmConfig("", "cfg.yaml");
  ASSERT_OK(c);
  EXPECT_TRUE(c->providers.empty());
  EXPECT_TRUE(c->models.empty());
}

// Issue 25: an operator's default timeout per step kind.
TEST(LlmConfigTest, StepTimeoutsAreDurationsOrNone) {
  absl::StatusOr<LlmConfig> c =
      ParseLlmConfig("step_timeouts:\n  exec: 2h\n  my_kind: none\n", "cfg.yaml");
  ASSERT_OK(c);
  EXPECT_EQ(c->step_timeouts.at("exec"), absl::Hours(2));
  EXPECT_EQ(c->step_timeouts.at("my_kind"), absl::InfiniteDuration());
  EXPECT_THAT(ParseLlmConfig("step_timeouts:\n  exec: forever\n", "cfg.yaml").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cfg.yaml:2: step_timeouts.exec: must be a positive duration")));
  EXPECT_THAT(ParseLlmConfig("step_timeouts: 5s\n", "cfg.yaml").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be a mapping")));
}

TEST(LlmConfigTest, CostIsTokensTimesPricePer1kRoundedUp) {
  EXPECT_EQ(CallCostMicros(500, 1500, 1000, 1000), 2000);
  EXPECT_EQ(CallCostMicros(500, 1500, 1, 0), 1);  // 0.5 micros rounds up
  EXPECT_EQ(CallCostMicros(500, 1500, 0, 0), 0);
  EXPECT_EQ(CallCostMicros(0, 0, 1'000'000, 1'000'000), 0);
  EXPECT_EQ(CallCostMicros(800000, 4000000, 412, 230), 329600 + 920000);
  EXPECT_EQ(CallCostMicros(int64_t{1} << 40, int64_t{1} << 40, INT64_MAX, INT64_MAX), INT64_MAX);
}

TEST(LlmConfigTest, ErrorsNameFileLineKeyAndFix) {
  absl::Status s = ErrorOf("providers:\n  local:\n    kind: openai\n    colour: blue\n");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("cfg.yaml:4: providers.local.colour: unknown key; allowed here: kind"));

  s = ErrorOf("providers: {local: {kind: openia}}\n");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("providers.local.kind: is 'openia'; allowed: openai, anthropic, fake"));
  s = ErrorOf("providers: {local: {base_url: http://x}}\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("providers.local.kind: is required"));
  s = ErrorOf("provider: {}\n");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("provider: unknown key; allowed here: providers, models, tenants"));
  s = ErrorOf("models: {w: {provider: nowhere}}\n");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("models.w.provider: 'nowhere' is not declared under providers"));
  s = ErrorOf("providers: {p: {kind: fake}}\nmodels: {w: {provider: p, input_price_per_1k: -1}}\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("models.w.input_price_per_1k: must be a number"));
  s = ErrorOf(
      "providers: {p: {kind: fake}}\nmodels: {w: {provider: p, input_price_per_1k: 1e-9}}\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("more than 6 decimal places"));
  s = ErrorOf("providers: {p: {kind: openai, timeout: soon}}\n");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("providers.p.timeout: must be a positive duration"));
  s = ErrorOf("providers: {p: {kind: openai, max_concurrency: 0}}\n");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("providers.p.max_concurrency: must be an integer from 1 to"));
  s = ErrorOf("providers: {p: {kind: openai, retry: {max_delay: 1s, initial_delay: 2s}}}\n");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("providers.p.retry.max_delay: must not be shorter than initial_delay"));
  s = ErrorOf("providers: {p: {kind: openai, base_url: ftp://x}}\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("use an http:// or https:// URL"));
  s = ErrorOf("providers: {Bad Name: {kind: fake}}\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("is not a valid name"));
  s = ErrorOf("tenants: {acme: {}}\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("tenants.acme.budget: is required"));
  s = ErrorOf("providers: [a, b]\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("providers: must be a mapping"));
  s = ErrorOf("providers: {p: {kind: openai}}\nproviders: {}\n");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  s = ErrorOf("providers: {p: {kind: [}\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("invalid YAML"));
}

TEST(LlmConfigTest, AnApiKeyValueIsRefusedAndNeverEchoed) {
  const std::string key = "sk-live-abcdef0123456789";
  absl::Status s = ErrorOf("providers: {p: {kind: openai, api_key: " + key + "}}\n");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("must be a secret reference"));
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr(key)));
}

TEST(LlmConfigTest, LoadLimitsApply) {
  LoadLimits limits;
  limits.max_bytes = 64;
  absl::Status s = ParseLlmConfig(kFull, "cfg.yaml", limits).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_bytes"));
  // An alias bomb is refused before it is expanded.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    const char prev = static_cast<char>(c - 1);
    bomb += std::string(1, c) + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" +
            prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev +
            ", *" + prev + "]\n";
  }
  s = ParseLlmConfig(bomb, "cfg.yaml").status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_nodes"));
  // Deep nesting is refused before anything walks it.
  s = ErrorOf("providers: " + std::string(5000, '[') + std::string(5000, ']') + "\n");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_depth"));
}

TEST(LlmConfigTest, MissingFileNamesTheFlag) {
  absl::Status s = LoadLlmConfigFile("/nonexistent/runloom.yaml").status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--config or RUNLOOM_CONFIG"));
}

// docs/operations.md, "Configuration file": the key table names exactly the
// keys the reader accepts, and the example file there loads. A key added to
// the reader and not to the table (or a row left behind after a key went)
// fails here, naming it.
TEST(LlmConfig, EveryKeyIsDocumentedAndEveryDocumentedKeyIsAccepted) {
  const std::string path = testing::SourceDir() + "/docs/operations.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t start = doc.find("\n## Configuration file");
  ASSERT_NE(start, std::string::npos) << path << " has no \"## Configuration file\" section";
  const size_t end = doc.find("\n## ", start + 1);
  const std::string section = doc.substr(start, end - start);

  // Table rows: "| `a.b.c`, `d` | ..." documents a.b.c and a.b.d.
  std::set<std::string> documented;
  for (absl::string_view line : absl::StrSplit(section, '\n')) {
    if (!absl::StartsWith(line, "| `")) continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, '|');
    std::string prefix;
    for (absl::string_view key : absl::StrSplit(cells[1], ',')) {
      key = absl::StripAsciiWhitespace(key);
      ASSERT_TRUE(absl::StartsWith(key, "`") && absl::EndsWith(key, "`")) << line;
      std::string k(key.substr(1, key.size() - 2));
      if (absl::StrContains(k, '.')) {
        prefix = k.substr(0, k.rfind('.') + 1);
      } else {
        k = prefix + k;
      }
      documented.insert(k);
    }
  }
  const std::vector<std::string> keys = ConfigFileKeys();
  const std::set<std::string> accepted(keys.begin(), keys.end());
  for (const std::string& k : accepted) {
    EXPECT_TRUE(documented.contains(k))
        << "the config file accepts `" << k << "`, but the table in " << path
        << " (\"## Configuration file\") has no row for it";
  }
  for (const std::string& k : documented) {
    EXPECT_TRUE(accepted.contains(k))
        << path << " documents config key `" << k << "`, which the config file refuses";
  }

  // The section's example file loads as it is written.
  const size_t yaml = section.find("```yaml\n");
  ASSERT_NE(yaml, std::string::npos);
  const size_t body = yaml + 8;
  const std::string example = section.substr(body, section.find("```", body) - body);
  EXPECT_OK(ParseLlmConfig(example, "operations.md example").status());
}

}  // namespace
}  // namespace runloom
