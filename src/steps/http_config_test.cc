// The http step's config: what Validate accepts and how it refuses the rest.
#include "steps/http_config.h"

#include "runloom/step.h"

#include "steps/builtin_steps.h"
#include "testing/status_matchers.h"
#include "testing/step_test_util.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>

namespace runloom::steps_internal {
namespace {

using ::runloom::steps_testing::MakeDef;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;

absl::Status Check(const json& config) { return NewHttpStep()->Validate(MakeDef("http", config)); }

void ExpectRefused(const json& config, const std::string& says) {
  EXPECT_THAT(Check(config), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(says)))
      << config.dump();
}

TEST(HttpConfigTest, FullWriteConfigParses) {
  json c = {{"method", "post"},
            {"url", "https://api.example.com/v1/tickets"},
            {"headers", {{"Authorization", "Bearer secret://API_TOKEN"}, {"X-Team", "sre"}}},
            {"body", {{"title", "{{ inputs.title }}"}}},
            {"expect", {200, 201}},
            {"max_response_bytes", 4096},
            {"write", true},
            {"action", "open_ticket"},
            {"lookup", {{"url", "https://api.example.com/v1/tickets/by-key"}, {"found", 200}}}};
  absl::StatusOr<HttpStepConfig> cfg = ParseHttpConfig(c, /*unresolved=*/true);
  ASSERT_OK(cfg);
  EXPECT_EQ(cfg->method, "POST");
  EXPECT_TRUE(cfg->write);
  EXPECT_EQ(cfg->action, "open_ticket");
  ASSERT_EQ(cfg->headers.size(), 2u);
  EXPECT_EQ(cfg->headers[0].first, "Authorization");
  EXPECT_EQ(cfg->headers[0].second.prefix, "Bearer ");
  EXPECT_EQ(cfg->headers[0].second.secret_name, "API_TOKEN");
  EXPECT_EQ(cfg->headers[1].second.secret_name, std::nullopt);
  EXPECT_EQ(cfg->expect, (StatusSet{200, 201}));
  EXPECT_EQ(cfg->max_response_bytes, 4096u);
  ASSERT_TRUE(cfg->lookup.has_value());
  EXPECT_EQ(cfg->lookup->method, "GET");
  EXPECT_EQ(cfg->lookup->found, (StatusSet{200}));
  EXPECT_EQ(cfg->lookup->missing, (StatusSet{404}));
}

TEST(HttpConfigTest, DefaultsAreAGetExpectingAny2xx) {
  absl::StatusOr<HttpStepConfig> cfg = ParseHttpConfig({{"url", "http://h/x"}}, false);
  ASSERT_OK(cfg);
  EXPECT_EQ(cfg->method, "GET");
  EXPECT_FALSE(cfg->write);
  EXPECT_EQ(cfg->action, "write");
  EXPECT_TRUE(StatusIn(cfg->expect, 204));
  EXPECT_FALSE(StatusIn(cfg->expect, 302));
  EXPECT_EQ(cfg->max_response_bytes, kDefaultMaxResponseBytes);
}

TEST(HttpConfigTest, TemplatesWaitForTheRun) {
  EXPECT_OK(Check({{"url", "{{ inputs.url }}"}, {"method", "{{ inputs.m }}"}}));
  EXPECT_OK(
      Check({{"url", "http://h/{{ inputs.path }}"}, {"headers", {{"X-A", "{{ inputs.a }}"}}}}));
}

TEST(HttpConfigTest, BadValuesAreRefusedWithTheKey) {
  ExpectRefused(json::object(), "missing required key 'url'");
  ExpectRefused({{"url", "ftp://h/x"}}, "must start with http:// or https://");
  ExpectRefused({{"url", "http://h/a b"}}, "spaces or control characters");
  ExpectRefused({{"url", "http://h/" + std::string(kMaxUrlBytes, 'a')}}, "at most 2048");
  ExpectRefused({{"url", "http://h"}, {"method", "TRACE"}}, "GET, POST, PUT, PATCH or DELETE");
  ExpectRefused({{"url", "http://h"}, {"body", {{"a", 1}}}}, "not sent with GET");
  ExpectRefused({{"url", "http://h"}, {"expect", 700}}, "statuses from 100 to 599");
  ExpectRefused({{"url", "http://h"}, {"expect", json::array()}}, "non-empty list");
  ExpectRefused({{"url", "http://h"}, {"max_response_bytes", 0}}, "max_response_bytes");
  ExpectRefused({{"url", "http://h"}, {"verb", "GET"}}, "unknown key 'verb'");
  ExpectRefused({{"url", "http://h"}, {"write", "yes"}}, "true or false");
}

TEST(HttpConfigTest, HeadersAreBounded) {
  ExpectRefused({{"url", "http://h"}, {"headers", "X-A: 1"}}, "map of name: value");
  ExpectRefused({{"url", "http://h"}, {"headers", {{"Bad Name", "v"}}}}, "invalid header name");
  ExpectRefused({{"url", "http://h"}, {"headers", {{"X-A", "a\r\nX-B: b"}}}}, "CR, LF or NUL");
  ExpectRefused({{"url", "http://h"}, {"headers", {{"X-A", 7}}}}, "must be a string");
  ExpectRefused({{"url", "http://h"}, {"headers", {{"Idempotency-Key", "k"}}}},
                "runloom sets itself");
  ExpectRefused({{"url", "http://h"}, {"headers", {{"host", "evil"}}}}, "runloom sets itself");
  ExpectRefused({{"url", "http://h"}, {"headers", {{"X-A", std::string(5000, 'v')}}}},
                "at most 4096");
  json many = json::object();
  for (int i = 0; i <= static_cast<int>(kMaxHeaders); ++i) many["X-" + std::to_string(i)] = "v";
  ExpectRefused({{"url", "http://h"}, {"headers", many}}, "at most 32");
  ExpectRefused({{"url", "http://h"}, {"headers", {{"Authorization", "secret://9bad"}}}},
                "secret://NAME at the end");
  ExpectRefused({{"url", "http://h"}, {"headers", {{"Authorization", "secret://A trailing"}}}},
                "secret://NAME at the end");
}

TEST(HttpConfigTest, WriteOnlyKeysNeedWrite) {
  ExpectRefused({{"url", "http://h"}, {"action", "a"}}, "add `write: true`");
  ExpectRefused({{"url", "http://h"}, {"lookup", {{"url", "http://h/l"}}}}, "add `write: true`");
  ExpectRefused({{"url", "http://h"}, {"method", "POST"}, {"write", true}, {"action", "Open!"}},
                "a-z, 0-9");
  ExpectRefused({{"url", "http://h"}, {"write", true}, {"lookup", {{"method", "GET"}}}},
                "missing required key 'lookup.url'");
  ExpectRefused({{"url", "http://h"}, {"write", true}, {"lookup", {{"url", "http://h"}, {"x", 1}}}},
                "unknown key 'x'");
  ExpectRefused(
      {{"url", "http://h"}, {"write", true}, {"lookup", {{"url", "http://h"}, {"missing", 200}}}},
      "both found and missing");
}

}  // namespace
}  // namespace runloom::steps_internal
