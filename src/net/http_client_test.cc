#include "net/http_client.h"

#include "testing/fiber_host.h"
#include "testing/scripted_http_server.h"
#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <string_view>
#include <vector>

namespace runloom::net {
namespace {

using ::runloom::testing::ScriptedHttpServer;
using ::testing::HasSubstr;
using ::testing::Not;
using Reply = ScriptedHttpServer::Reply;

std::unique_ptr<ScriptedHttpServer> Serve(ScriptedHttpServer::Handler handler) {
  absl::StatusOr<std::unique_ptr<ScriptedHttpServer>> server =
      ScriptedHttpServer::Start(std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status();
  return std::move(server).value();
}

TEST(HttpClient, PostsHeadersAndBodyAndReadsTheResponse) {
  auto server = Serve([](const ScriptedHttpServer::Request& r) {
    return Reply{.status = 201,
                 .headers = {{"X-Ratelimit-Remaining-Requests", "7"}},
                 .body = absl::StrCat("echo:", r.body)};
  });
  absl::StatusOr<HttpResponse> resp = SendHttp({.method = "POST",
                                                .url = server->url() + "/v1/things?x=1",
                                                .headers = {{"Authorization", "Bearer k"}},
                                                .body = R"({"a":1})"});
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->status, 201);
  EXPECT_EQ(resp->body, R"(echo:{"a":1})");
  EXPECT_EQ(resp->Header("x-ratelimit-remaining-requests"), "7");
  EXPECT_EQ(resp->Header("content-type"), "application/json");
  EXPECT_EQ(resp->Header("absent"), std::nullopt);
  std::vector<ScriptedHttpServer::Request> seen = server->requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].target, "/v1/things?x=1");
  EXPECT_EQ(seen[0].headers["authorization"], "Bearer k");
  EXPECT_EQ(seen[0].headers.count("expect"), 0u);
}

TEST(HttpClient, AnErrorStatusIsAResponseNotAnError) {
  auto server = Serve([](const ScriptedHttpServer::Request&) {
    return Reply{.status = 429, .headers = {{"Retry-After", "2"}}, .body = "slow down"};
  });
  absl::StatusOr<HttpResponse> resp = SendHttp({.url = server->url() + "/"});
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->status, 429);
  EXPECT_EQ(resp->Header("retry-after"), "2");
}

TEST(HttpClient, ASlowServerIsATimeout) {
  auto server =
      Serve([](const ScriptedHttpServer::Request&) { return Reply{.delay = absl::Seconds(5)}; });
  absl::StatusOr<HttpResponse> resp =
      SendHttp({.url = server->url() + "/slow", .total_timeout = absl::Milliseconds(200)});
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kDeadlineExceeded) << resp.status();
  EXPECT_THAT(resp.status().message(), HasSubstr("/slow"));
}

TEST(HttpClient, ADroppedConnectionIsUnavailable) {
  auto server = Serve([](const ScriptedHttpServer::Request&) { return Reply{.drop = true}; });
  absl::StatusOr<HttpResponse> resp = SendHttp({.method = "PUT", .url = server->url() + "/w"});
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kUnavailable) << resp.status();
  EXPECT_EQ(server->requests().size(), 1u);  // it arrived; only the answer was lost
}

TEST(HttpClient, OnDataSeesTheBodyAsItArrives) {
  auto server = Serve([](const ScriptedHttpServer::Request&) {
    return Reply{.chunks = {"data: 1\n\n", "data: 2\n\n", "data: 3\n\n"},
                 .chunk_interval = absl::Milliseconds(20)};
  });
  std::vector<std::string> pieces;
  absl::StatusOr<HttpResponse> resp =
      SendHttp({.url = server->url() + "/s",
                .on_data = [&pieces](std::string_view p) { pieces.emplace_back(p); }});
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->body, "data: 1\n\ndata: 2\n\ndata: 3\n\n");
  EXPECT_EQ(absl::StrJoin(pieces, ""), resp->body);
  EXPECT_EQ(pieces.size(), 3u);  // 20 ms apart: one piece each
  EXPECT_EQ(resp->Header("content-type"), "text/event-stream");
}

TEST(HttpClient, AStreamCutMidWayIsUnavailable) {
  auto server = Serve([](const ScriptedHttpServer::Request&) {
    return Reply{.chunks = {"a", "b", "c"}, .cut_after = 2};
  });
  std::string seen;
  absl::StatusOr<HttpResponse> resp = SendHttp(
      {.url = server->url() + "/s", .on_data = [&seen](std::string_view p) { seen.append(p); }});
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kUnavailable) << resp.status();
  EXPECT_EQ(seen, "ab");
}

TEST(HttpClient, OnDataIsNotCalledPastTheBound) {
  auto server = Serve([](const ScriptedHttpServer::Request&) {
    return Reply{.chunks = {"12345", "67890"}, .chunk_interval = absl::Milliseconds(20)};
  });
  std::string seen;
  absl::StatusOr<HttpResponse> resp =
      SendHttp({.url = server->url() + "/s",
                .max_response_bytes = 7,
                .on_data = [&seen](std::string_view p) { seen.append(p); }});
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kResourceExhausted) << resp.status();
  EXPECT_EQ(seen, "12345");
}

TEST(HttpClient, NothingListeningIsUnavailable) {
  int port = 0;
  {
    auto server = Serve([](const ScriptedHttpServer::Request&) { return Reply{}; });
    port = server->port();
  }
  absl::StatusOr<HttpResponse> resp = SendHttp({.url = absl::StrCat("http://127.0.0.1:", port)});
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kUnavailable) << resp.status();
}

TEST(HttpClient, AnOversizedBodyIsRefused) {
  auto server = Serve(
      [](const ScriptedHttpServer::Request&) { return Reply{.body = std::string(4096, 'x')}; });
  absl::StatusOr<HttpResponse> resp = SendHttp({.url = server->url(), .max_response_bytes = 1024});
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kResourceExhausted) << resp.status();
}

TEST(HttpClient, OnlyHttpAndHttpsAreSpoken) {
  for (const char* url : {"file:///etc/passwd", "gopher://127.0.0.1/", "not a url"}) {
    absl::StatusOr<HttpResponse> resp = SendHttp({.url = url});
    EXPECT_FALSE(resp.ok()) << url;
    EXPECT_NE(resp.status().code(), absl::StatusCode::kOk);
  }
  EXPECT_EQ(SendHttp({.url = "file:///etc/passwd"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HttpClient, CancelStopsAWaitingRequest) {
  auto server =
      Serve([](const ScriptedHttpServer::Request&) { return Reply{.delay = absl::Seconds(10)}; });
  std::atomic<int> polls{0};
  absl::StatusOr<HttpResponse> resp =
      SendHttp({.url = server->url(), .cancelled = [&] { return ++polls > 3; }});
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kCancelled) << resp.status();
}

// On fibers (core/fiber.h) requests are performed by the transfer thread:
// twenty fibers on one thread have all twenty requests in flight at once.
TEST(HttpClient, OnFibersRequestsInFlightHoldNoThread) {
  auto server = Serve([](const ScriptedHttpServer::Request& r) {
    return Reply{.body = absl::StrCat("reply to ", r.target), .delay = absl::Seconds(1)};
  });
  constexpr int kFibers = 20;
  runloom::testing::FiberHost host;
  std::atomic<int> in_flight{0};
  std::atomic<int> peak{0};
  std::atomic<int> ok{0};
  for (int i = 0; i < kFibers; ++i) {
    host.Spawn([&, i] {
      peak = std::max(peak.load(), ++in_flight);
      absl::StatusOr<HttpResponse> resp = SendHttp({.url = absl::StrCat(server->url(), "/", i)});
      --in_flight;
      if (resp.ok() && resp->status == 200 && resp->body == absl::StrCat("reply to /", i)) ++ok;
    });
  }
  host.Run(1);
  EXPECT_EQ(ok.load(), kFibers);
  EXPECT_EQ(peak.load(), kFibers);
}

TEST(HttpClient, OnAFiberCancelStreamingAndTimeoutsWorkAsOnAThread) {
  auto server = Serve([](const ScriptedHttpServer::Request& r) {
    if (r.target == "/stream") {
      return Reply{.chunks = {"a", "b", "c"}, .chunk_interval = absl::Milliseconds(20)};
    }
    return Reply{.delay = absl::Seconds(10)};
  });
  runloom::testing::FiberHost host;
  absl::Status cancelled, timed_out;
  std::string pieces;
  absl::StatusOr<HttpResponse> streamed;
  host.Spawn([&] {
    std::atomic<int> polls{0};
    cancelled = SendHttp({.url = server->url() + "/slow", .cancelled = [&] { return ++polls > 3; }})
                    .status();
  });
  host.Spawn([&] {
    timed_out =
        SendHttp({.url = server->url() + "/slow", .total_timeout = absl::Milliseconds(200)})
            .status();
  });
  host.Spawn([&] {
    streamed = SendHttp({.url = server->url() + "/stream",
                         .on_data = [&](std::string_view piece) { pieces.append(piece); }});
  });
  host.Run(1);
  EXPECT_EQ(cancelled.code(), absl::StatusCode::kCancelled) << cancelled;
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded) << timed_out;
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(streamed->body, "abc");
  EXPECT_EQ(pieces, "abc");
}

TEST(HttpClient, KeepsNoSecretInItsMessages) {
  absl::StatusOr<HttpResponse> resp = SendHttp({.url = "http://user:pa55@127.0.0.1:1/p?key=s3cret",
                                                .headers = {{"authorization", "Bearer t0ken"}},
                                                .connect_timeout = absl::Milliseconds(200)});
  ASSERT_FALSE(resp.ok());
  EXPECT_THAT(resp.status().message(), Not(HasSubstr("pa55")));
  EXPECT_THAT(resp.status().message(), Not(HasSubstr("s3cret")));
  EXPECT_THAT(resp.status().message(), Not(HasSubstr("t0ken")));
}

TEST(HttpClient, RedactUrlKeepsSchemeHostAndPath) {
  EXPECT_EQ(RedactUrl("https://u:p@api.example.com:8443/v1/x?key=1#f"),
            "https://api.example.com:8443/v1/x");
  EXPECT_EQ(RedactUrl("http://h/a@b"), "http://h/a@b");
  EXPECT_EQ(RedactUrl("http://h"), "http://h");
}

}  // namespace
}  // namespace runloom::net
