// Streamed replies (issue 24): a step's pieces reach Engine::WatchLive as
// they come, a late joiner reads the text so far from Engine::LiveCalls, a
// reset voids it, and nothing of it is stored but the step's own output.
#include "runloom/engine.h"

#include "runloom/sqlite.h"

#include "engine/observe/live_text.h"
#include "engine/observe/live_text_relay.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

namespace runloom {
namespace {

using engine_internal::LiveText;
using engine_internal::LiveTextRelay;

// Streams `pieces` (a list of strings), voiding what it sent once when
// `reset_after` pieces went out; its output is the text after the reset.
class StreamingKind final : public StepKind {
 public:
  absl::Status Validate(const StepDef&) const override { return absl::OkStatus(); }
  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) override {
    std::string text;
    int sent = 0;
    const int reset_after = config.value("reset_after", -1);
    for (const nlohmann::json& p : config.value("pieces", nlohmann::json::array())) {
      if (sent == reset_after) {
        ctx.StreamReset();
        text.clear();
      }
      ctx.StreamDelta(p.get<std::string>());
      text += p.get<std::string>();
      ++sent;
      if (sent == 2) {
        seen_mid_call = true;
        mid_call = watcher_engine->LiveCalls(ctx.run_id());
      }
    }
    StepOutput out;
    out.output = {{"text", text}};
    return out;
  }
  Engine* watcher_engine = nullptr;
  bool seen_mid_call = false;
  std::vector<LiveCall> mid_call;
};

TEST(LiveText, FramesCarryOffsetsAndTheTextSoFarIsKeptUntilTheEnd) {
  LiveText live;
  std::vector<LiveFrame> frames;
  auto sub = live.Watch("r1", [&](const LiveFrame& f) { frames.push_back(f); });
  live.Append("r1", "a", 1, "Hel");
  live.Append("r1", "a", 1, "lo");
  live.Append("r2", "a", 1, "other run");
  ASSERT_EQ(live.Calls("r1").size(), 1u);
  EXPECT_EQ(live.Calls("r1")[0].text, "Hello");
  live.Reset("r1", "a", 1);
  live.Append("r1", "a", 1, "Hi");
  live.End("r1", "a", 1);
  EXPECT_TRUE(live.Calls("r1").empty());
  ASSERT_EQ(frames.size(), 5u);
  EXPECT_EQ(frames[1].offset, 3);
  EXPECT_EQ(frames[2].kind, LiveFrame::Kind::kReset);
  EXPECT_EQ(frames[3].offset, 0);
  EXPECT_EQ(frames[4].kind, LiveFrame::Kind::kEnd);
  EXPECT_EQ(frames[4].offset, 2);
  sub.reset();
  live.Append("r1", "b", 1, "unheard");
  EXPECT_EQ(frames.size(), 5u);
}

TEST(LiveText, AStepsPiecesReachWatchersAndOnlyItsOutputIsStored) {
  auto kind = std::make_shared<StreamingKind>();
  EngineOptions opts;
  auto registry = StepRegistry::WithBuiltins();
  registry->Register("streamer", kind);
  opts.registry = std::move(registry);
  std::unique_ptr<Engine> engine = OpenTestEngine(std::move(opts));
  ASSERT_NE(engine, nullptr);
  kind->watcher_engine = engine.get();
  auto wf = LoadWorkflowYaml(R"(
name: streams
steps:
  - id: talk
    kind: streamer
    pieces: ["The ", "quick ", "brown ", "fox"]
    reset_after: 1
)",
                             "s.yaml");
  ASSERT_OK(wf);
  auto started = engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  std::vector<LiveFrame> frames;
  auto sub = engine->WatchLive(started->run.id, [&](const LiveFrame& f) { frames.push_back(f); });
  auto done = engine->ExecuteRun(started->run.id);
  ASSERT_OK(done);
  ASSERT_EQ(done->status, RunStatus::kCompleted);
  // A joiner mid-call read the text so far (after the reset: "quick ").
  ASSERT_TRUE(kind->seen_mid_call);
  ASSERT_EQ(kind->mid_call.size(), 1u);
  EXPECT_EQ(kind->mid_call[0].path, "talk");
  EXPECT_EQ(kind->mid_call[0].text, "quick ");
  // The frames, replayed as a client would, give the stored text.
  std::string text;
  for (const LiveFrame& f : frames) {
    if (f.kind == LiveFrame::Kind::kReset) text.clear();
    if (f.kind == LiveFrame::Kind::kDelta) {
      EXPECT_EQ(f.offset, static_cast<int64_t>(text.size()));
      text += f.text;
    }
  }
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back().kind, LiveFrame::Kind::kEnd);
  auto steps = engine->ListSteps(started->run.id, std::nullopt);
  ASSERT_OK(steps);
  ASSERT_EQ(steps->size(), 1u);
  EXPECT_EQ((*steps)[0].output["text"], text);
  EXPECT_EQ(text, "quick brown fox");
  EXPECT_TRUE(engine->LiveCalls(started->run.id).empty());
  // No event holds a piece: only the step's record has the text.
  auto events = engine->ListEvents(started->run.id, 0, 1000);
  ASSERT_OK(events);
  for (const Event& e : *events) EXPECT_EQ(e.data.dump().find("brown"), std::string::npos);
}

// Across processes (two relays on one store stand for two processes): the
// text of a call one engine streams reaches the other's watchers from the
// store, growing; its whole text and its end are in the store before End
// returns (before the step's record would commit); the row goes after
// kKeepEnded; a writer's own rows never come back to it.
TEST(LiveTextRelay, AnotherEnginesCallReachesThisOnesWatchersThroughTheStore) {
  SqliteOptions o;
  absl::StatusOr<Backend> backend = OpenSqlite(TempDb(), o);
  ASSERT_OK(backend);
  Store* store = backend->store.get();
  LiveText here;   // the executing engine's
  LiveText there;  // the watching engine's
  LiveTextRelay writer(&here, store, NullLogger(), "host:1/aa");
  LiveTextRelay reader(&there, store, NullLogger(), "host:2/bb");
  std::vector<LiveFrame> frames;
  auto sub = there.Watch("r1", [&](const LiveFrame& f) { frames.push_back(f); });
  std::vector<LiveFrame> own;  // the writer's own watcher: in-process frames only
  auto own_sub = here.Watch("r1", [&](const LiveFrame& f) { own.push_back(f); });

  here.Append("r1", "talk", 1, "The ");
  writer.TickOnce();
  reader.TickOnce();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].kind, LiveFrame::Kind::kDelta);
  EXPECT_EQ(frames[0].offset, 0);
  EXPECT_EQ(frames[0].text, "The ");
  ASSERT_EQ(reader.RemoteCalls("r1").size(), 1u);
  EXPECT_EQ(reader.RemoteCalls("r1")[0].text, "The ");
  EXPECT_TRUE(writer.RemoteCalls("r1").empty());  // its own row

  here.Append("r1", "talk", 1, "quick ");
  here.Append("r1", "talk", 1, "fox");
  writer.TickOnce();
  reader.TickOnce();
  reader.TickOnce();  // nothing new: nothing sent
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[1].offset, 4);
  EXPECT_EQ(frames[1].text, "quick fox");

  here.Append("r1", "talk", 1, " jumps");
  here.End("r1", "talk", 1);  // no tick of the writer: End put it
  reader.TickOnce();
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[2].text, " jumps");
  EXPECT_EQ(frames[3].kind, LiveFrame::Kind::kEnd);
  EXPECT_EQ(frames[3].offset, 19);
  EXPECT_TRUE(reader.RemoteCalls("r1").empty());  // ended
  reader.TickOnce();
  EXPECT_EQ(frames.size(), 4u);  // the end once
  // The writer's watcher got its frames in-process, none twice.
  EXPECT_EQ(own.size(), 5u);

  writer.Stop();  // deletes the rows it put
  absl::StatusOr<std::vector<LiveTextRow>> rows = store->ListLiveText("r1", absl::Hours(1));
  ASSERT_OK(rows);
  EXPECT_TRUE(rows->empty());
}

// A writer that stopped without an end (a killed process) leaves its row;
// the step's next attempt, by another process, replaces it, and the watcher
// gets the end of the old attempt's text, then the new one's from offset 0.
TEST(LiveTextRelay, ANewAttemptReplacesTheCallAndTheWatcherSeesTheOldOneEnd) {
  SqliteOptions o;
  absl::StatusOr<Backend> backend = OpenSqlite(TempDb(), o);
  ASSERT_OK(backend);
  Store* store = backend->store.get();
  LiveText there;
  LiveTextRelay reader(&there, store, NullLogger(), "host:2/bb");
  std::vector<LiveFrame> frames;
  auto sub = there.Watch("r1", [&](const LiveFrame& f) { frames.push_back(f); });
  ASSERT_OK(store->PutLiveText(
      LiveTextRow{.run_id = "r1", .path = "talk", .attempt = 1, .writer = "dead/1", .text = "Par"}));
  reader.TickOnce();
  ASSERT_OK(store->PutLiveText(
      LiveTextRow{.run_id = "r1", .path = "talk", .attempt = 2, .writer = "new/2", .text = "Re"}));
  reader.TickOnce();
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].text, "Par");
  EXPECT_EQ(frames[1].kind, LiveFrame::Kind::kEnd);
  EXPECT_EQ(frames[1].attempt, 1);
  EXPECT_EQ(frames[2].attempt, 2);
  EXPECT_EQ(frames[2].offset, 0);
  EXPECT_EQ(frames[2].text, "Re");
}

}  // namespace
}  // namespace runloom
