// The /api/v1 routes over real HTTP on 127.0.0.1 (SQLite): each route's
// answer, its role, and the 400/401/403/404/409/413 cases with nothing written.
#include "runloom/events.h"

#include "testing/api_test_util.h"

#include "boost/asio/write.hpp"
#include "gmock/gmock.h"

#include <chrono>
#include <functional>

namespace runloom::api::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(ApiTest, StartRunIs201ThenTheSameRunWith200ForARepeatedKey) {
  const std::string body = R"({"workflow": "quick", "inputs": {"n": 3}, "idempotency_key": "k-1"})";
  ClientResponse first = Post("/api/v1/runs", body, "operator-token");
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(first.json()["workflow"], "quick");
  EXPECT_EQ(first.json()["inputs"]["n"], 3);
  ClientResponse again = Post("/api/v1/runs", body, "operator-token");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["id"], first.json()["id"]);
  EXPECT_EQ(CountRuns(), 1);
}

TEST_F(ApiTest, StartRunRefusalsWriteNothing) {
  struct Case {
    std::string body;
    std::string token;
    int status;
    std::string code;
    std::string field;
  };
  const std::vector<Case> cases = {
      {R"({"workflow": "quick")", "operator-token", 400, "bad_json", ""},
      {R"([1, 2])", "operator-token", 400, "bad_json", ""},
      {R"({"workflow": "quick", "reviewer": "x"})", "operator-token", 400, "unknown_field",
       "reviewer"},
      {R"({"workflow": 7})", "operator-token", 400, "wrong_type", "workflow"},
      {R"({"workflow": "quick", "inputs": []})", "operator-token", 400, "wrong_type", "inputs"},
      {R"({"workflow": "quick", "version": "2"})", "operator-token", 400, "wrong_type", "version"},
      {R"({"inputs": {}})", "operator-token", 400, "missing_field", "workflow"},
      {R"({"workflow": "quick", "budget_micros": -1})", "operator-token", 400, "invalid_argument",
       "budget_micros"},
      {R"({"workflow": "quick", "budget_micros": "2.50"})", "operator-token", 400, "wrong_type",
       "budget_micros"},
      {R"({"workflow": "quick", "budget_micros": 1.5})", "operator-token", 400, "wrong_type",
       "budget_micros"},
      {R"({"workflow": "quick", "budget_micros": {"a": [1]}})", "operator-token", 400, "wrong_type",
       "budget_micros"},
      {R"({"workflow": "quick", "inputs": {"n": "many"}})", "operator-token", 400,
       "invalid_argument", "inputs"},
      {R"({"workflow": "nope"})", "operator-token", 404, "not_found", ""},
      {R"({"workflow": "quick"})", "", 401, "unauthenticated", ""},
      {R"({"workflow": "quick"})", "forged-token", 401, "unauthenticated", ""},
      {R"({"workflow": "quick"})", "viewer-token", 403, "forbidden", ""},
  };
  for (const Case& c : cases) {
    ClientResponse r = Post("/api/v1/runs", c.body, c.token);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    EXPECT_EQ(r.json().value("code", ""), c.code) << c.body;
    EXPECT_EQ(r.json().value("field", ""), c.field) << c.body;
    EXPECT_THAT(r.body, Not(HasSubstr("forged-token")));
  }
  EXPECT_EQ(CountRuns(), 0);
}

TEST_F(ApiTest, OversizedBodyIs413AndWritesNothing) {
  std::string big =
      R"({"workflow": "quick", "inputs": {"pad": ")" + std::string(2 << 20, 'x') + R"("}})";
  ClientResponse r = Post("/api/v1/runs", big, "operator-token");
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(r.json().value("code", ""), "payload_too_large");
  EXPECT_EQ(CountRuns(), 0);
}

TEST_F(ApiTest, ListRunsPagesWithACursorAndFilters) {
  for (int i = 0; i < 3; ++i) StartAndAwait("quick");
  StartAndAwait("gated");
  ClientResponse page1 = Get("/api/v1/runs?workflow=quick&limit=2");
  ASSERT_EQ(page1.status, 200) << page1.body;
  ASSERT_EQ(page1.json()["runs"].size(), 2u);
  const std::string cursor = page1.json()["next_cursor"];
  ASSERT_FALSE(cursor.empty());
  ClientResponse page2 = Get("/api/v1/runs?workflow=quick&limit=2&cursor=" + cursor);
  ASSERT_EQ(page2.status, 200) << page2.body;
  EXPECT_EQ(page2.json()["runs"].size(), 1u);
  EXPECT_EQ(page2.json()["next_cursor"], "");
  ClientResponse paused = Get("/api/v1/runs?status=paused");
  ASSERT_EQ(paused.json()["runs"].size(), 1u);
  EXPECT_EQ(paused.json()["runs"][0]["workflow"], "gated");
  EXPECT_EQ(Get("/api/v1/runs?status=sleeping").json().value("field", ""), "status");
  EXPECT_EQ(Get("/api/v1/runs?limit=0").status, 400);
  EXPECT_EQ(Get("/api/v1/runs?cursor=not-a-cursor").status, 400);
  EXPECT_EQ(Get("/api/v1/runs", "").status, 401);
}

// Child runs (issue 23): the API links a parent and its children both ways.
TEST_F(ApiTest, ARunsChildrenAreListedAndEachNamesItsParent) {
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(R"(
name: parent
steps:
  - {id: kid, kind: run, workflow: quick, inputs: {n: 2}}
)",
                                                 "parent.yaml");
  ASSERT_OK(wf);
  ASSERT_OK(engine()->RegisterWorkflow(*wf));
  ClientResponse r =
      Post("/api/v1/runs", nlohmann::json{{"workflow", "parent"}}.dump(), "operator-token");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id = r.json().value("id", "");
  absl::StatusOr<RunRecord> done = absl::UnknownError("not awaited");
  const absl::Time deadline = engine()->clock()->Now() + absl::Seconds(20);
  do {  // waiting for its child is not an end
    done = engine()->AwaitRun(id, deadline);
  } while (done.ok() && !IsTerminal(done->status) && engine()->clock()->Now() < deadline);
  ASSERT_OK(done);
  ASSERT_EQ(done->status, RunStatus::kCompleted) << done->error;
  ClientResponse kids = Get("/api/v1/runs?parent=" + id);
  ASSERT_EQ(kids.status, 200) << kids.body;
  ASSERT_EQ(kids.json()["runs"].size(), 1u) << kids.body;
  const nlohmann::json kid = kids.json()["runs"][0];
  EXPECT_EQ(kid["workflow"], "quick");
  EXPECT_EQ(kid["parent_run_id"], id);
  EXPECT_EQ(kid["parent_step_path"], "kid");
  EXPECT_EQ(kid["inputs"], (nlohmann::json{{"n", 2}}));
  ClientResponse parent = Get("/api/v1/runs/" + id);
  EXPECT_EQ(parent.json()["parent_run_id"], nullptr);
  EXPECT_EQ(Get("/api/v1/runs?parent=" + kid["id"].get<std::string>()).json()["runs"].size(), 0u);
}

TEST_F(ApiTest, RunStepsGateAndEventsOfAPausedRun) {
  RunRecord run = StartAndAwait("gated");
  ASSERT_EQ(run.status, RunStatus::kPaused);
  const std::string base = "/api/v1/runs/" + run.id;
  ClientResponse got = Get(base);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.json()["status"], "paused");
  ClientResponse steps = Get(base + "/steps");
  ASSERT_EQ(steps.status, 200);
  EXPECT_EQ(steps.json()["steps"][0]["step_id"], "draft");
  ClientResponse gate = Get(base + "/gate");
  ASSERT_EQ(gate.status, 200) << gate.body;
  EXPECT_EQ(gate.json()["proposal"]["text"], "draft 1");
  EXPECT_EQ(gate.json()["proposal_digest"].get<std::string>().rfind("sha256:", 0), 0u);
  ClientResponse all = Get(base + "/events");
  ASSERT_EQ(all.status, 200);
  const size_t n = all.json()["events"].size();
  ASSERT_GE(n, 3u);
  ClientResponse after = Get(base + "/events?after=2");
  EXPECT_EQ(after.json()["events"].size(), n - 2);
  EXPECT_EQ(after.json()["events"][0]["seq"], 3);
  EXPECT_EQ(Get(base + "/events?after=-1").json().value("field", ""), "after");
  for (const char* tail : {"", "/steps", "/gate", "/events"}) {
    ClientResponse missing = Get(std::string("/api/v1/runs/no-such-run") + tail);
    EXPECT_EQ(missing.status, 404) << tail;
    EXPECT_EQ(missing.json().value("code", ""), "not_found") << tail;
  }
  ClientResponse done = Get("/api/v1/runs/" + StartAndAwait("quick").id + "/gate");
  EXPECT_EQ(done.status, 404);
  EXPECT_EQ(done.json().value("code", ""), "no_pending_gate");
}

}  // namespace
}  // namespace runloom::api::testing

namespace runloom::api::testing {
namespace {

// Reads what the server sends until it closes (or `timeout`).
std::string ReadUntilClosed(boost::asio::ip::tcp::socket& s, std::chrono::milliseconds timeout) {
  boost::asio::io_context& ioc = static_cast<boost::asio::io_context&>(s.get_executor().context());
  std::string got;
  char buf[4096];
  bool closed = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::function<void()> read = [&] {
    s.async_read_some(boost::asio::buffer(buf), [&](boost::system::error_code ec, size_t n) {
      got.append(buf, n);
      if (ec) {
        closed = true;
        return;
      }
      read();
    });
  };
  read();
  ioc.restart();
  ioc.run_until(deadline);
  if (!closed) got += "<still open>";
  boost::system::error_code ignored;
  s.close(ignored);
  ioc.restart();
  ioc.run();
  return got;
}

TEST_F(ApiTest, SlowAndOversizedRequestsAreCutOffWithoutHoldingTheServer) {
  StopAll();
  StartAll({.idle_timeout = absl::Milliseconds(300), .request_timeout = absl::Milliseconds(300)});
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket slow(ioc);
  slow.connect({boost::asio::ip::make_address("127.0.0.1"), port()});
  boost::asio::write(slow,
                     boost::asio::buffer(std::string("GET /healthz HTTP/1.1\r\nHost: x\r\n")));
  // The half-sent request holds no thread: others are answered meanwhile.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Get("/healthz", "").status, 200);
  EXPECT_EQ(ReadUntilClosed(slow, std::chrono::milliseconds(5'000)), "");

  boost::asio::ip::tcp::socket body(ioc);
  body.connect({boost::asio::ip::make_address("127.0.0.1"), port()});
  boost::asio::write(body, boost::asio::buffer(std::string(
                               "POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                               "operator-token\r\nContent-Length: 100\r\n\r\n{\"work")));
  EXPECT_EQ(ReadUntilClosed(body, std::chrono::milliseconds(5'000)), "");
  EXPECT_EQ(CountRuns(), 0);

  boost::asio::ip::tcp::socket big(ioc);
  big.connect({boost::asio::ip::make_address("127.0.0.1"), port()});
  boost::asio::write(big, boost::asio::buffer("GET /healthz HTTP/1.1\r\nX-Pad: " +
                                              std::string(32 * 1024, 'x') + "\r\n\r\n"));
  EXPECT_THAT(ReadUntilClosed(big, std::chrono::milliseconds(5'000)),
              ::testing::HasSubstr("HTTP/1.1 431"));
}

}  // namespace
}  // namespace runloom::api::testing
