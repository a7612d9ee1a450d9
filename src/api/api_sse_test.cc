// Event streams over real HTTP: a run's events as SSE with seq as the id,
// resumed with Last-Event-ID after the test cuts the connection mid-run (no
// gap, no duplicate), the end after run.finished, keep-alive comments, the
// all-runs stream and its resume on a restarted server, and streams ended by
// a graceful shutdown (no `: end`).
#include "runloom/events.h"
#include "runloom/sqlite.h"

#include "testing/api_test_util.h"

#include "gmock/gmock.h"

#include <chrono>
#include <map>

namespace runloom::api::testing {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

std::string EventsUrl(const std::string& run_id) { return "/api/v1/runs/" + run_id + "/events"; }

TEST_F(ApiTest, SseResumesAfterACutWithNoGapAndNoDuplicate) {
  ClientResponse started = Post("/api/v1/runs", R"({"workflow": "slow"})", "operator-token");
  ASSERT_EQ(started.status, 201) << started.body;
  const std::string id = started.json()["id"];
  std::vector<SseEvent> seen;
  {
    SseReader first(port(), EventsUrl(id), "viewer-token");
    // Read until step "two" (which blocks) has started: the run is mid-way.
    for (int i = 0; i < 200; ++i) {
      std::vector<SseEvent> more = first.ReadEvents(1, milliseconds(100));
      seen.insert(seen.end(), more.begin(), more.end());
      if (!seen.empty() && seen.back().event == "step.started" &&
          absl::StrContains(seen.back().data, "\"two\"")) {
        break;
      }
    }
    ASSERT_FALSE(seen.empty());
    ASSERT_EQ(seen.back().event, "step.started");
    first.Cut();
  }
  harness_->kind->release.Notify();  // the run goes on while nobody listens
  ASSERT_OK(engine()->AwaitRun(id, engine()->clock()->Now() + absl::Seconds(20)));
  SseReader second(port(), EventsUrl(id), "viewer-token", seen.back().id);
  std::vector<SseEvent> rest = second.ReadToEnd(milliseconds(10'000));
  EXPECT_TRUE(second.ended());
  ASSERT_FALSE(rest.empty());
  seen.insert(seen.end(), rest.begin(), rest.end());
  const int64_t last = engine()->GetRun(id)->last_event_seq;
  ASSERT_EQ(static_cast<int64_t>(seen.size()), last);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].id, std::to_string(i + 1));
    nlohmann::json data = nlohmann::json::parse(seen[i].data);
    EXPECT_EQ(data["seq"], static_cast<int64_t>(i + 1));
    EXPECT_EQ(data["type"], seen[i].event);
  }
  EXPECT_EQ(seen.back().event, "run.finished");
}

// A run's streams share its feed (run_feed.h), which keeps only the latest
// events: with a window of 2, a stream that starts from the beginning reads
// the store itself, then takes the feed's events once caught up; another that
// resumes inside the window takes them from the feed alone. Both see every
// event once, in order.
TEST_F(ApiTest, SseStreamsBehindTheFeedWindowReadTheStoreThenJoinIt) {
  StopAll();
  StartAll({.stream_window_events = 2});
  RunRecord paused = StartAndAwait("gated");
  ASSERT_EQ(paused.status, RunStatus::kPaused);
  const int64_t at_gate = paused.last_event_seq;
  ASSERT_GT(at_gate, 3);
  SseReader from_start(port(), EventsUrl(paused.id), "viewer-token");
  SseReader inside(port(), EventsUrl(paused.id), "viewer-token", std::to_string(at_gate - 1));
  ASSERT_EQ(static_cast<int64_t>(from_start.ReadEvents(at_gate, milliseconds(5'000)).size()),
            at_gate);
  ASSERT_EQ(inside.ReadEvents(1, milliseconds(5'000)).size(), 1u);
  const std::string digest = Get("/api/v1/runs/" + paused.id + "/gate").json()["proposal_digest"];
  ASSERT_EQ(
      Post("/api/v1/runs/" + paused.id + "/decisions",
           nlohmann::json{{"digest", digest}, {"decision", "approve"}}.dump(), "approver-token")
          .status,
      200);
  absl::StatusOr<RunRecord> done =
      engine()->AwaitRun(paused.id, engine()->clock()->Now() + absl::Seconds(20));
  ASSERT_OK(done);
  ASSERT_EQ(done->status, RunStatus::kCompleted);
  std::vector<SseEvent> rest = from_start.ReadToEnd(milliseconds(10'000));
  std::vector<SseEvent> rest_inside = inside.ReadToEnd(milliseconds(10'000));
  EXPECT_TRUE(from_start.ended());
  EXPECT_TRUE(inside.ended());
  for (const std::vector<SseEvent>* events : {&rest, &rest_inside}) {
    ASSERT_EQ(static_cast<int64_t>(events->size()), done->last_event_seq - at_gate);
    for (size_t i = 0; i < events->size(); ++i) {
      EXPECT_EQ((*events)[i].id, std::to_string(at_gate + 1 + static_cast<int64_t>(i)));
    }
    EXPECT_EQ(events->back().event, "run.finished");
  }
}

TEST_F(ApiTest, SseOfAFinishedRunReplaysThenEndsAndResumingAtTheEndSendsNothing) {
  RunRecord done = StartAndAwait("quick");
  SseReader all(port(), EventsUrl(done.id) + "?after=1", "viewer-token");
  std::vector<SseEvent> events = all.ReadToEnd(milliseconds(5'000));
  EXPECT_TRUE(all.ended());
  ASSERT_EQ(static_cast<int64_t>(events.size()), done.last_event_seq - 1);
  EXPECT_EQ(events.front().id, "2");
  EXPECT_THAT(all.raw(), HasSubstr(": end\n\n"));
  SseReader at_end(port(), EventsUrl(done.id), "viewer-token", std::to_string(done.last_event_seq));
  EXPECT_TRUE(at_end.ReadToEnd(milliseconds(5'000)).empty());
  EXPECT_TRUE(at_end.ended());
  EXPECT_THAT(at_end.raw(), HasSubstr("text/event-stream"));
  EXPECT_THAT(at_end.raw(), HasSubstr(": end\n\n"));
}

TEST_F(ApiTest, SseOfARerunRunGoesOnPastTheFirstFinish) {
  RunRecord done = StartAndAwait("quick");
  ASSERT_EQ(
      Post("/api/v1/runs/" + done.id + "/rerun", R"({"from_phase": "main"})", "operator-token")
          .status,
      200);
  absl::StatusOr<RunRecord> again =
      engine()->AwaitRun(done.id, engine()->clock()->Now() + absl::Seconds(20));
  ASSERT_OK(again);
  ASSERT_EQ(again->status, RunStatus::kCompleted);
  SseReader all(port(), EventsUrl(done.id), "viewer-token");
  std::vector<SseEvent> events = all.ReadToEnd(milliseconds(5'000));
  EXPECT_TRUE(all.ended());
  ASSERT_EQ(static_cast<int64_t>(events.size()), again->last_event_seq);
  int finishes = 0;
  for (const SseEvent& e : events) finishes += e.event == "run.finished" ? 1 : 0;
  EXPECT_EQ(finishes, 2);
}

TEST_F(ApiTest, SseRefusalsAreOrdinaryErrors) {
  RunRecord done = StartAndAwait("quick");
  SseReader bad_id(port(), EventsUrl(done.id), "viewer-token", "seven");
  bad_id.ReadToEnd(milliseconds(300));
  EXPECT_THAT(bad_id.raw(), HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(bad_id.raw(), HasSubstr("Last-Event-ID"));
  SseReader no_token(port(), EventsUrl(done.id), "");
  no_token.ReadToEnd(milliseconds(300));
  EXPECT_THAT(no_token.raw(), HasSubstr("HTTP/1.1 401"));
  SseReader no_run(port(), EventsUrl("no-such-run"), "viewer-token");
  no_run.ReadToEnd(milliseconds(300));
  EXPECT_THAT(no_run.raw(), HasSubstr("HTTP/1.1 404"));
}

TEST_F(ApiTest, AllRunsStreamSendsStatusChanges) {
  SseReader live(port(), "/api/v1/events", "viewer-token");
  live.ReadEvents(1, milliseconds(100));  // the headers and the position are in
  RunRecord done = StartAndAwait("quick");
  bool completed = false;
  for (int i = 0; i < 100 && !completed; ++i) {
    for (const SseEvent& e : live.ReadEvents(1, milliseconds(100))) {
      EXPECT_EQ(e.event, "run");
      EXPECT_FALSE(e.id.empty());
      nlohmann::json data = nlohmann::json::parse(e.data);
      completed = completed || (data["run_id"] == done.id && data["status"] == "completed");
    }
  }
  EXPECT_TRUE(completed);
  EXPECT_EQ(Get("/api/v1/events").status, 406);
}

// Issue 28: the all-runs stream's ids are times of the store, so a client
// cut by a graceful restart resumes on a new server over the same store with
// Last-Event-ID and gets every run that changed while it was away: one that
// finished, one that was created and finished.
TEST_F(ApiTest, AllRunsStreamResumesWithLastEventIdOnARestartedServer) {
  ClientResponse started = Post("/api/v1/runs", R"({"workflow": "slow"})", "operator-token");
  ASSERT_EQ(started.status, 201) << started.body;
  const std::string slow_id = started.json()["id"];
  std::string last_id;
  {
    SseReader live(port(), "/api/v1/events", "viewer-token");
    for (int i = 0; i < 50 && last_id.empty(); ++i) {
      for (const SseEvent& e : live.ReadEvents(1, milliseconds(100))) last_id = e.id;
    }
    ASSERT_FALSE(last_id.empty()) << "the stream sends its position first";
    server_->Shutdown();  // a graceful restart: the stream ends cleanly
    live.ReadToEnd(milliseconds(5'000));
    ASSERT_TRUE(live.ended());
  }
  harness_->kind->release.Notify();  // the slow run finishes while nobody listens
  ASSERT_OK(engine()->AwaitRun(slow_id, engine()->clock()->Now() + absl::Seconds(20)));
  StartRunRequest quick;
  quick.workflow_name = "quick";
  absl::StatusOr<CreateRunResult> created = engine()->StartRun(quick);
  ASSERT_OK(created);
  ASSERT_OK(engine()->AwaitRun(created->run.id, engine()->clock()->Now() + absl::Seconds(20)));

  absl::StatusOr<std::unique_ptr<Server>> again =
      Server::Start({.port = 0}, engine(), &auth_, registry_.get());
  ASSERT_OK(again);
  server_ = *std::move(again);
  SseReader resumed(port(), "/api/v1/events", "viewer-token", last_id);
  std::map<std::string, std::string> status;
  for (int i = 0; i < 50 && status.size() < 2; ++i) {
    for (const SseEvent& e : resumed.ReadEvents(1, milliseconds(100))) {
      EXPECT_NE(e.event, "reset") << e.data;
      if (e.event != "run") continue;
      EXPECT_GE(std::stoll(e.id), std::stoll(last_id));
      nlohmann::json data = nlohmann::json::parse(e.data);
      if (data["status"] == "completed") status[data["run_id"]] = data["status"];
    }
  }
  EXPECT_EQ(status.count(slow_id), 1u);
  EXPECT_EQ(status.count(created->run.id), 1u);
}

// Malformed ids are refused; one older than the window gets a reset (re-read
// the runs) and the live stream.
TEST_F(ApiTest, AllRunsStreamRefusesBadIdsAndResetsOldOnes) {
  SseReader bad(port(), "/api/v1/events", "viewer-token", "yesterday");
  bad.ReadToEnd(milliseconds(300));
  EXPECT_THAT(bad.raw(), HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(bad.raw(), HasSubstr("Last-Event-ID"));
  SseReader old(port(), "/api/v1/events", "viewer-token", "1");
  std::vector<SseEvent> first = old.ReadEvents(1, milliseconds(5'000));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].event, "reset");
  EXPECT_FALSE(first[0].id.empty());
  EXPECT_FALSE(old.ended());
}

TEST_F(ApiTest, IdleStreamsGetKeepAliveCommentsAndShutdownEndsThem) {
  StopAll();
  StartAll({.keepalive_interval = absl::Milliseconds(50)});
  RunRecord paused = StartAndAwait("gated");
  ASSERT_EQ(paused.status, RunStatus::kPaused);
  SseReader reader(port(), EventsUrl(paused.id), "viewer-token");
  std::vector<SseEvent> events = reader.ReadEvents(paused.last_event_seq, milliseconds(5'000));
  EXPECT_EQ(static_cast<int64_t>(events.size()), paused.last_event_seq);
  EXPECT_TRUE(reader.ReadEvents(1, milliseconds(300)).empty());
  EXPECT_THAT(reader.raw(), HasSubstr(": keep-alive\n\n"));
  EXPECT_FALSE(reader.ended());
  server_->Shutdown();
  reader.ReadToEnd(milliseconds(5'000));
  EXPECT_TRUE(reader.ended());
  EXPECT_THAT(reader.raw(), Not(HasSubstr(": end\n\n")));  // a cut, not the run's end
}

// Issue 24, streaming: a run's stream carries its streaming call's pieces as
// llm.delta frames after the stored events; a subscriber that joins mid-call
// first gets the text so far (offset 0), then the pieces after it. Replayed
// by offset, each stream's frames give exactly the step's stored text.
std::string Replay(const std::vector<SseEvent>& events, int* deltas) {
  std::string text;
  for (const SseEvent& e : events) {
    if (e.event == "llm.reset") text.clear();
    if (e.event != "llm.delta") continue;
    EXPECT_TRUE(e.id.empty()) << "a delta has no id: " << e.id;
    const nlohmann::json d = nlohmann::json::parse(e.data);
    EXPECT_EQ(d["offset"].get<int64_t>(), static_cast<int64_t>(text.size())) << e.data;
    text += d["text"].get<std::string>();
    ++*deltas;
  }
  return text;
}

// Registers `streamy` (one llm call streaming its reply over 1.5 s) and
// starts a run of it over HTTP; its id, or "" on a failure (reported).
std::string StartStreamy(Engine* engine, uint16_t port) {
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(R"(
name: streamy
steps:
  - id: talk
    kind: llm
    stream: true
    prompt: "one two three four five six seven eight nine ten"
    fake: {latency: 1500ms}
)",
                                                 "streamy.yaml");
  EXPECT_OK(wf);
  if (!wf.ok() || !engine->RegisterWorkflow(*wf).ok()) return "";
  ClientResponse started =
      Request(port, "POST", "/api/v1/runs", R"({"workflow": "streamy"})", "operator-token");
  EXPECT_EQ(started.status, 201) << started.body;
  return started.status == 201 ? started.json().value("id", "") : "";
}

TEST_F(ApiTest, SseCarriesAStreamingCallsPiecesAndALateJoinerGetsTheTextSoFar) {
  const std::string id = StartStreamy(engine(), port());
  ASSERT_FALSE(id.empty());
  SseReader early(port(), EventsUrl(id), "viewer-token");
  std::vector<SseEvent> seen_early;
  for (int i = 0; i < 100; ++i) {
    std::vector<SseEvent> more = early.ReadEvents(1, milliseconds(100));
    seen_early.insert(seen_early.end(), more.begin(), more.end());
    if (!more.empty() && more.back().event == "llm.delta") break;
  }
  ASSERT_FALSE(seen_early.empty());
  ASSERT_EQ(seen_early.back().event, "llm.delta") << "no piece within 10 s";
  SseReader late(port(), EventsUrl(id), "viewer-token");
  std::vector<SseEvent> rest_early = early.ReadToEnd(milliseconds(10'000));
  std::vector<SseEvent> seen_late = late.ReadToEnd(milliseconds(10'000));
  EXPECT_TRUE(early.ended());
  EXPECT_TRUE(late.ended());
  seen_early.insert(seen_early.end(), rest_early.begin(), rest_early.end());
  auto steps = engine()->ListSteps(id, std::nullopt);
  ASSERT_OK(steps);
  ASSERT_EQ(steps->size(), 1u);
  const std::string stored = (*steps)[0].output["text"];
  int early_deltas = 0;
  int late_deltas = 0;
  EXPECT_EQ(Replay(seen_early, &early_deltas), stored);
  EXPECT_EQ(Replay(seen_late, &late_deltas), stored);
  EXPECT_GT(early_deltas, 3) << "the text came in pieces";
  // The stored events are all there too, ids 1..last, deltas in between.
  int stored_events = 0;
  for (const SseEvent& e : seen_late) stored_events += e.id.empty() ? 0 : 1;
  EXPECT_EQ(stored_events, engine()->GetRun(id)->last_event_seq);
  EXPECT_THAT(late.raw(), HasSubstr("event: llm.end"));
}

// A server that executes nothing (`serve --no-executors`) streams the text of
// a call another process executes (a worker: a second engine on the same
// database), from the store's live_text rows; its stream waits past the run's
// end for the call's last piece and its end, so the replayed pieces are the
// stored text whole.
TEST_F(ApiTest, SseOfAServerThatExecutesNothingCarriesAWorkersStreamedTextToItsEnd) {
  StopAll();
  StartAll({}, /*auth=*/true, /*executors=*/false);
  const std::string id = StartStreamy(engine(), port());
  ASSERT_FALSE(id.empty());
  SseReader reader(port(), EventsUrl(id), "viewer-token");
  absl::StatusOr<Backend> backend = OpenSqlite(harness_->path, {});
  ASSERT_OK(backend);
  EngineOptions wo;
  wo.registry = StepRegistry::WithBuiltins();
  wo.idle_poll = absl::Milliseconds(10);
  absl::StatusOr<std::unique_ptr<Engine>> worker = Engine::Open(std::move(wo), *std::move(backend));
  ASSERT_OK(worker);
  (*worker)->Start();
  std::vector<SseEvent> seen = reader.ReadToEnd(milliseconds(20'000));
  (*worker)->Stop();
  EXPECT_TRUE(reader.ended());
  auto steps = engine()->ListSteps(id, std::nullopt);
  ASSERT_OK(steps);
  ASSERT_EQ(steps->size(), 1u);
  int deltas = 0;
  EXPECT_EQ(Replay(seen, &deltas), (*steps)[0].output["text"]);
  EXPECT_GT(deltas, 3) << "the text came in pieces";
  // The call's end, before the run's or after it (a poll of the store may
  // come after the commit is seen); `: end` last either way (ended()).
  int ends = 0;
  for (const SseEvent& e : seen) ends += e.event == "llm.end" ? 1 : 0;
  EXPECT_EQ(ends, 1) << reader.raw();
}

}  // namespace
}  // namespace runloom::api::testing
