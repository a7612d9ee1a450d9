// The run context's one codec: what it reads, what it writes, and that a key
// it does not know survives a write.
#include "engine/rules/run_context.h"

#include "gtest/gtest.h"

namespace runloom::engine_internal {
namespace {

TEST(RunContext, RoundTripsEveryField) {
  RunContext c;
  c.working_dir = "/w";
  c.feedback = "shorter";
  c.rerun_from = "research";
  c.budget = StoredBudget{.tenant = "acme", .limit_micros = 5000};
  c.pending_gate = {{"path", "review"}};
  const nlohmann::json stored = EncodeRunContext(c);
  EXPECT_EQ(stored, (nlohmann::json{{"working_dir", "/w"},
                                    {"feedback", "shorter"},
                                    {"rerun_from", "research"},
                                    {"budget", {{"tenant", "acme"}, {"limit_micros", 5000}}},
                                    {"pending_gate", {{"path", "review"}}}}));
  const RunContext back = DecodeRunContext(stored);
  EXPECT_EQ(back.working_dir, "/w");
  EXPECT_EQ(back.feedback, "shorter");
  EXPECT_EQ(back.rerun_from, "research");
  ASSERT_TRUE(back.budget.has_value());
  EXPECT_EQ(back.budget->tenant, "acme");
  EXPECT_EQ(back.budget->limit_micros, 5000);
  EXPECT_EQ(back.pending_gate, (nlohmann::json{{"path", "review"}}));
}

TEST(RunContext, RoundTripsAChildRunsParent) {
  RunContext c;
  c.parent = StoredParent{.run_id = "r1", .step_path = "loop[2]/child", .revision = 3, .depth = 2};
  const nlohmann::json stored = EncodeRunContext(c);
  EXPECT_EQ(stored, (nlohmann::json{{"parent",
                                     {{"run_id", "r1"},
                                      {"step_path", "loop[2]/child"},
                                      {"revision", 3},
                                      {"depth", 2}}}}));
  const RunContext back = DecodeRunContext(stored);
  ASSERT_TRUE(back.parent.has_value());
  EXPECT_EQ(back.parent->run_id, "r1");
  EXPECT_EQ(back.parent->step_path, "loop[2]/child");
  EXPECT_EQ(back.parent->revision, 3);
  EXPECT_EQ(back.parent->depth, 2);
  EXPECT_TRUE(back.unknown.empty());
}

TEST(RunContext, EmptyFieldsAreNotWrittenAndUnknownKeysAreKept) {
  const nlohmann::json stored = {{"feedback", "f"}, {"written_by_a_newer_binary", {1, 2}}};
  RunContext c = DecodeRunContext(stored);
  c.feedback.clear();
  EXPECT_EQ(EncodeRunContext(c), (nlohmann::json{{"written_by_a_newer_binary", {1, 2}}}));
  EXPECT_EQ(EncodeRunContext(RunContext{}), nlohmann::json::object());
}

TEST(RunContext, FieldsOfTheWrongTypeReadAsAbsent) {
  const RunContext c = DecodeRunContext(
      {{"working_dir", 7}, {"budget", "acme"}, {"rerun_from", nullptr}});
  EXPECT_EQ(c.working_dir, "");
  EXPECT_FALSE(c.budget.has_value());
  EXPECT_EQ(c.rerun_from, "");
  EXPECT_TRUE(DecodeRunContext(nlohmann::json::array()).pending_gate.is_null());
}

}  // namespace
}  // namespace runloom::engine_internal
