// A secret input given as a plain value in POST /api/v1/runs (not as a
// secret://NAME reference) is written nowhere, over real HTTP: not in the
// database file or its WAL, not in any API response (JSON or event stream),
// not in an error message. The step that uses it prints it to stdout and
// stderr, so the test also proves the value reached the step and was
// scrubbed ("[secret]") everywhere the run wrote.
#include "testing/api_test_util.h"

#include "gmock/gmock.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace runloom::api::testing {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

// The step prints the secret to stderr (kept as the step's stderr tail) and
// returns it as its output; then the run pauses at a gate whose proposal
// quotes that output.
constexpr char kLeakYaml[] = R"(
name: leak
inputs:
  key: {type: string, secret: true}
steps:
  - id: use
    kind: exec
    command: [sh, -c, 'echo key-is-$0 >&2; echo "{\"k\": \"$0\"}"', '{{ inputs.key }}']
  - id: review
    kind: approval
    proposal: {text: "the step said {{ steps.use.output.k }}"}
)";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(ApiTest, APlainSecretInputIsWrittenNowhere) {
  const std::string secret = "plain-s3cr3t-" + std::to_string(getpid());
  ClientResponse registered =
      Post("/api/v1/workflows", nlohmann::json{{"yaml", kLeakYaml}}.dump(), "admin-token");
  ASSERT_EQ(registered.status, 201) << registered.body;

  std::string seen;  // every response body the API gave
  auto keep = [&seen](const ClientResponse& r) {
    seen += r.body;
    seen += "\n";
    return r;
  };
  // Refused requests that carry the value: their errors do not repeat it.
  ClientResponse unknown = keep(Post(
      "/api/v1/runs",
      nlohmann::json{{"workflow", "leak"}, {"inputs", {{"key", secret}, {"nope", secret}}}}.dump(),
      "operator-token"));
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  ClientResponse wrong_type = keep(Post(
      "/api/v1/runs", nlohmann::json{{"workflow", "leak"}, {"inputs", {{"key", {secret}}}}}.dump(),
      "operator-token"));
  EXPECT_EQ(wrong_type.status, 400) << wrong_type.body;

  ClientResponse started = keep(Post(
      "/api/v1/runs",
      nlohmann::json{{"workflow", "leak"}, {"inputs", {{"key", secret}}}, {"idempotency_key", "k1"}}
          .dump(),
      "operator-token"));
  ASSERT_EQ(started.status, 201) << started.body;
  const std::string id = started.json()["id"];
  absl::StatusOr<RunRecord> paused =
      engine()->AwaitRun(id, engine()->clock()->Now() + absl::Seconds(20));
  ASSERT_OK(paused);
  ASSERT_EQ(paused->status, RunStatus::kPaused) << ToString(paused->status) << ": " << paused->error;
  // The same key again: the first run, with the value given again.
  EXPECT_EQ(
      keep(Post("/api/v1/runs",
                nlohmann::json{
                    {"workflow", "leak"}, {"inputs", {{"key", secret}}}, {"idempotency_key", "k1"}}
                    .dump(),
                "operator-token"))
          .status,
      200);

  const std::string run = "/api/v1/runs/" + id;
  for (const std::string& target : {run, run + "/steps", run + "/events", run + "/gate",
                                    std::string("/api/v1/runs"), std::string("/metrics")}) {
    ClientResponse r = keep(Get(target));
    EXPECT_EQ(r.status, 200) << target << ": " << r.body;
  }
  SseReader stream(port(), run + "/events", "viewer-token");
  std::vector<SseEvent> events = stream.ReadEvents(paused->last_event_seq, milliseconds(5'000));
  EXPECT_EQ(static_cast<int64_t>(events.size()), paused->last_event_seq);
  for (const SseEvent& e : events) seen += e.data + "\n";

  // The value reached the step, which printed it: scrubbed where it was kept.
  EXPECT_THAT(seen, HasSubstr("key-is-[secret]"));
  EXPECT_THAT(seen, HasSubstr("the step said [secret]"));
  EXPECT_THAT(seen, Not(HasSubstr(secret)));

  const std::string db = harness_->path;
  ASSERT_FALSE(ReadAll(db).empty());
  for (const std::string& file : {db, db + "-wal", db + "-shm"}) {
    EXPECT_EQ(ReadAll(file).find(secret), std::string::npos) << "the secret is in " << file;
  }
}

}  // namespace
}  // namespace runloom::api::testing
