#include "net/otlp_exporter.h"

#include "testing/scripted_http_server.h"
#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <map>
#include <string>
#include <vector>

namespace runloom::net {
namespace {

using ::runloom::testing::ScriptedHttpServer;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;
using Reply = ScriptedHttpServer::Reply;

constexpr char kTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";

Span MakeSpan(const std::string& id, const std::string& parent, const std::string& name) {
  Span s;
  s.trace_id = kTrace;
  s.span_id = id;
  s.parent_span_id = parent;
  s.name = name;
  s.start = absl::FromUnixSeconds(1'800'000'000);
  s.end = s.start + absl::Milliseconds(250);
  return s;
}

// The spans of every post the receiver got, by span id.
std::map<std::string, json> Received(const ScriptedHttpServer& server) {
  std::map<std::string, json> out;
  for (const ScriptedHttpServer::Request& r : server.requests()) {
    const json body = json::parse(r.body);
    for (const json& rs : body.at("resourceSpans")) {
      for (const json& ss : rs.at("scopeSpans")) {
        for (const json& s : ss.at("spans")) out[s.at("spanId").get<std::string>()] = s;
      }
    }
  }
  return out;
}

// A tree of three spans reaches the receiver as OTLP/JSON: hex ids, the
// parent links, nanosecond times as strings, typed attributes, the status,
// the resource's service name, and the configured headers.
TEST(OtlpExporter, PostsTheSpansAsOtlpJsonWithTheirTree) {
  auto server = ScriptedHttpServer::Start(
      [](const ScriptedHttpServer::Request&) { return Reply{.status = 200, .body = "{}"}; });
  ASSERT_OK(server);
  absl::StatusOr<std::unique_ptr<OtlpExporter>> otlp =
      OtlpExporter::Create({.endpoint = (*server)->url() + "/v1/traces",
                            .service_version = "0.9.0",
                            .headers = {{"x-api-key", "k1"}}});
  ASSERT_OK(otlp);
  Span run = MakeSpan("00f067aa0ba902b7", "", "run blog");
  run.kind = SpanKind::kServer;
  run.attributes = {{"runloom.run_id", "r_1"}, {"runloom.attempts", 2}, {"ok", true},
                    {"ratio", 0.5}};
  Span step = MakeSpan("00f067aa0ba902b8", "00f067aa0ba902b7", "step draft");
  step.error = true;
  step.error_message = "exit status 3";
  Span call = MakeSpan("00f067aa0ba902b9", "00f067aa0ba902b8", "llm fake");
  call.kind = SpanKind::kClient;
  for (Span* s : {&run, &step, &call}) (*otlp)->Export(*s);
  (*otlp)->Stop();
  EXPECT_EQ((*otlp)->exported(), 3);
  EXPECT_EQ((*otlp)->dropped(), 0);

  std::vector<ScriptedHttpServer::Request> requests = (*server)->requests();
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/v1/traces");
  EXPECT_EQ(requests[0].headers.at("content-type"), "application/json");
  EXPECT_EQ(requests[0].headers.at("x-api-key"), "k1");
  const json body = json::parse(requests[0].body);
  EXPECT_EQ(body["resourceSpans"][0]["resource"]["attributes"][0],
            json({{"key", "service.name"}, {"value", {{"stringValue", "runloom"}}}}));

  std::map<std::string, json> spans = Received(**server);
  ASSERT_EQ(spans.size(), 3u);
  const json& r = spans.at("00f067aa0ba902b7");
  EXPECT_EQ(r["traceId"], kTrace);
  EXPECT_FALSE(r.contains("parentSpanId"));
  EXPECT_EQ(r["kind"], 2);
  EXPECT_EQ(r["startTimeUnixNano"], "1800000000000000000");
  EXPECT_EQ(r["endTimeUnixNano"], "1800000000250000000");
  EXPECT_EQ(r["status"]["code"], 1);
  std::map<std::string, json> attrs;
  for (const json& a : r["attributes"]) attrs[a["key"]] = a["value"];
  EXPECT_EQ(attrs["runloom.run_id"], json({{"stringValue", "r_1"}}));
  EXPECT_EQ(attrs["runloom.attempts"], json({{"intValue", "2"}}));
  EXPECT_EQ(attrs["ok"], json({{"boolValue", true}}));
  EXPECT_EQ(attrs["ratio"], json({{"doubleValue", 0.5}}));
  EXPECT_EQ(spans.at("00f067aa0ba902b8")["parentSpanId"], "00f067aa0ba902b7");
  EXPECT_EQ(spans.at("00f067aa0ba902b8")["status"],
            json({{"code", 2}, {"message", "exit status 3"}}));
  EXPECT_EQ(spans.at("00f067aa0ba902b9")["parentSpanId"], "00f067aa0ba902b8");
  EXPECT_EQ(spans.at("00f067aa0ba902b9")["kind"], 3);
}

// A full queue drops (and counts) rather than blocks; batches are bounded.
TEST(OtlpExporter, ASlowCollectorCostsDroppedSpansNeverABlockedCaller) {
  auto server = ScriptedHttpServer::Start([](const ScriptedHttpServer::Request&) {
    return Reply{.status = 200, .body = "{}", .delay = absl::Milliseconds(300)};
  });
  ASSERT_OK(server);
  absl::StatusOr<std::unique_ptr<OtlpExporter>> otlp =
      OtlpExporter::Create({.endpoint = (*server)->url() + "/v1/traces",
                            .max_queue = 10,
                            .max_batch = 5,
                            .flush_every = absl::Milliseconds(50)});
  ASSERT_OK(otlp);
  for (int i = 0; i < 200; ++i) {
    (*otlp)->Export(MakeSpan(absl::StrCat("00000000000001", absl::Hex(i, absl::kZeroPad2)), "",
                             "s"));
  }
  (*otlp)->Stop();
  EXPECT_EQ((*otlp)->exported() + (*otlp)->dropped(), 200);
  EXPECT_GE((*otlp)->dropped(), 200 - 10 - 5);  // the queue's bound, and a batch in flight
  for (const ScriptedHttpServer::Request& r : (*server)->requests()) {
    EXPECT_LE(json::parse(r.body)["resourceSpans"][0]["scopeSpans"][0]["spans"].size(), 5u);
  }
}

// A collector that is down: each failed batch is dropped and counted, and
// Stop does not try it once per batch.
TEST(OtlpExporter, ACollectorThatIsDownCostsCountedDrops) {
  absl::StatusOr<std::unique_ptr<OtlpExporter>> otlp = OtlpExporter::Create(
      {.endpoint = "http://127.0.0.1:1/v1/traces", .max_batch = 2, .timeout = absl::Seconds(1)});
  ASSERT_OK(otlp);
  for (int i = 0; i < 9; ++i) (*otlp)->Export(MakeSpan("00f067aa0ba902b7", "", "s"));
  (*otlp)->Stop();
  EXPECT_EQ((*otlp)->exported(), 0);
  EXPECT_EQ((*otlp)->dropped(), 9);
  EXPECT_GE((*otlp)->failed_batches(), 1);
  (*otlp)->Export(MakeSpan("00f067aa0ba902b7", "", "after stop"));
  EXPECT_EQ((*otlp)->dropped(), 10);
}

TEST(OtlpExporter, RefusesAnEndpointThatIsNotHttp) {
  EXPECT_THAT(OtlpExporter::Create({.endpoint = "collector:4318"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an http(s) URL")));
}

TEST(OtlpEndpoint, TheFlagThenTheTracesVariableThenTheBaseVariable) {
  std::map<std::string, std::string> env;
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(OtlpTracesEndpoint("", getenv), "");
  env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://c:4318/";
  EXPECT_EQ(OtlpTracesEndpoint("", getenv), "http://c:4318/v1/traces");
  env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://t:4318/custom";
  EXPECT_EQ(OtlpTracesEndpoint("", getenv), "http://t:4318/custom");
  EXPECT_EQ(OtlpTracesEndpoint("http://f/v1/traces", getenv), "http://f/v1/traces");
}

TEST(OtlpHeaders, ParsesNameValuePairsAndRefusesWithoutEchoingAValue) {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> h =
      ParseOtlpHeaders("Api-Key=s%3Dcret, x-team = blue");
  ASSERT_OK(h);
  EXPECT_EQ(*h, (std::vector<std::pair<std::string, std::string>>{{"api-key", "s=cret"},
                                                                  {"x-team", "blue"}}));
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> bad =
      ParseOtlpHeaders("ok=1,topsecretvalue");
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("entry 2")));
  EXPECT_THAT(std::string(bad.status().message()), ::testing::Not(HasSubstr("topsecret")));
  EXPECT_THAT(ParseOtlpHeaders("a=x%0Ay"), StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> escape =
      ParseOtlpHeaders("k=secret%zz");
  EXPECT_THAT(escape, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'%25'")));
  EXPECT_THAT(std::string(escape.status().message()), ::testing::Not(HasSubstr("secret")));
}

TEST(TraceParentHeader, ParsesVersion00AndRefusesMalformedOnes) {
  std::optional<TraceContext> tp =
      ParseTraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(tp.has_value());
  EXPECT_EQ(tp->trace_id, kTrace);
  EXPECT_EQ(tp->span_id, "00f067aa0ba902b7");
  EXPECT_EQ(TraceParentOf(*tp), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  // A later version's extra fields are ignored.
  EXPECT_TRUE(
      ParseTraceParent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what").has_value());
  for (const char* bad : {
           "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
       }) {
    EXPECT_FALSE(ParseTraceParent(bad).has_value()) << bad;
  }
  EXPECT_FALSE(ParseTraceParent(std::string(100'000, '0')).has_value());
}

}  // namespace
}  // namespace runloom::net
