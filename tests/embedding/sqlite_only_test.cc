// The engine as an embedder links it on SQLite alone (runloom::engine_sqlite):
// this binary links nothing else of runloom, and no PostgreSQL, Redis,
// libcurl or Boost (tests/embedding/check_links.sh checks its ldd output;
// cmake/LinkClosure.cmake its link line at configure time). It registers only
// the SQLite backend and runs a workflow of local step kinds to its end.
#include "runloom/backend.h"
#include "runloom/engine.h"
#include "runloom/sqlite.h"
#include "runloom/workflow.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>

namespace runloom {
namespace {

using ::testing::HasSubstr;

constexpr char kWorkflow[] = R"(
name: embedded
inputs:
  topic: {type: string, default: durable runs}
steps:
  - id: draft
    kind: llm
    prompt: "Write about {{ inputs.topic }}"
  - id: count
    kind: exec
    command: ["sh", "-c", "echo '{\"ok\": true}'"]
  - id: done
    kind: noop
    output: {finished: true}
)";

TEST(SqliteOnlyEngine, RunsAWorkflowOnARegistryOfSqliteAlone) {
  BackendRegistry registry;
  ASSERT_TRUE(RegisterSqliteBackend(registry).ok());
  absl::StatusOr<Backend> backend = registry.Open("sqlite::memory:", {});
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Open({}, *std::move(backend));
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(kWorkflow, "embedded.yaml");
  ASSERT_TRUE(wf.ok()) << wf.status();
  absl::StatusOr<CreateRunResult> started = (*engine)->StartRun({.workflow = *wf});
  ASSERT_TRUE(started.ok()) << started.status();
  absl::StatusOr<RunRecord> done = (*engine)->ExecuteRun(started->run.id);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->status, RunStatus::kCompleted) << done->error;
}

TEST(SqliteOnlyEngine, OtherSchemesAreNotInThisRegistry) {
  BackendRegistry registry;
  ASSERT_TRUE(RegisterSqliteBackend(registry).ok());
  absl::StatusOr<Backend> pg = registry.Open("postgres://u@127.0.0.1:1/db", {});
  EXPECT_EQ(pg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(pg.status().message()), HasSubstr("unknown scheme 'postgres'"));
  EXPECT_THAT(std::string(pg.status().message()), HasSubstr("sqlite::memory:"));
  EXPECT_EQ(RegisterSqliteBackend(registry).code(), absl::StatusCode::kAlreadyExists);
}

TEST(SqliteOnlyEngine, TheHttpKindIsNotALocalBuiltin) {
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(R"(
name: fetch
steps:
  - id: get
    kind: http
    url: "http://127.0.0.1:1/"
)",
                                                 "fetch.yaml");
  ASSERT_TRUE(wf.ok()) << wf.status();
  EXPECT_EQ(StepRegistry::WithLocalBuiltins()->Find("http"), nullptr);
  EXPECT_NE(StepRegistry::WithLocalBuiltins()->Find("llm"), nullptr);
}

}  // namespace
}  // namespace runloom
