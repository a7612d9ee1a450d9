// The outcome rule as a pure function: without a template, with one, and
// every value a template may resolve to.
#include "engine/rules/outcome.h"

#include "gtest/gtest.h"

namespace runloom::engine_internal {
namespace {

using Resolved = std::optional<absl::StatusOr<nlohmann::json>>;

RunOutcome With(const nlohmann::json& v, bool failed = false, const std::string& error = "") {
  return ResolveOutcome(failed, error, Resolved(absl::StatusOr<nlohmann::json>(v)));
}

TEST(Outcome, WithoutATemplateTheGraphDecides) {
  // Issue 8, finding 9: no `outcome:` and nothing failed is plain
  // "completed", as workflow-yaml.md says, not "completed (outcome approved)".
  RunOutcome o = ResolveOutcome(false, "", std::nullopt);
  EXPECT_EQ(o.status, RunStatus::kCompleted);
  EXPECT_EQ(o.outcome, "");
  EXPECT_EQ(o.error, "");
  o = ResolveOutcome(true, "step b failed: boom", std::nullopt);
  EXPECT_EQ(o.status, RunStatus::kFailed);
  EXPECT_EQ(o.outcome, "failed");
  EXPECT_EQ(o.error, "step b failed: boom");
}

TEST(Outcome, TemplateValues) {
  EXPECT_EQ(With("approved").status, RunStatus::kCompleted);
  RunOutcome o = With("completed", true, "ignored");
  EXPECT_EQ(o.status, RunStatus::kCompleted);
  EXPECT_EQ(o.outcome, "approved");
  EXPECT_EQ(o.error, "");  // a completed run carries no error
  o = With("rejected", false, "");
  EXPECT_EQ(o.status, RunStatus::kRejected);
  EXPECT_EQ(o.outcome, "rejected");
  EXPECT_EQ(o.error, "");
  o = With("unresolved", true, "step x failed: y");
  EXPECT_EQ(o.status, RunStatus::kUnresolved);
  EXPECT_EQ(o.error, "step x failed: y");
  o = With("failed");
  EXPECT_EQ(o.status, RunStatus::kFailed);
  EXPECT_EQ(o.error, "the outcome rule resolved to failed");
  o = With("failed", true, "step x failed: y");
  EXPECT_EQ(o.error, "step x failed: y");
}

TEST(Outcome, BadTemplatesFailTheRunAndSayWhy) {
  RunOutcome o = With("maybe");
  EXPECT_EQ(o.status, RunStatus::kFailed);
  EXPECT_EQ(o.outcome, "failed");
  EXPECT_EQ(o.error,
            "outcome: 'maybe' is not one of approved, completed, rejected, unresolved, failed");
  o = With(42);
  EXPECT_EQ(o.status, RunStatus::kFailed);
  EXPECT_EQ(o.error, "outcome: expected a string, got 42");
  o = ResolveOutcome(false, "",
                     Resolved(absl::StatusOr<nlohmann::json>(
                         absl::InvalidArgumentError("unknown reference 'x'"))));
  EXPECT_EQ(o.status, RunStatus::kFailed);
  EXPECT_EQ(o.error, "outcome: unknown reference 'x'");
}

}  // namespace
}  // namespace runloom::engine_internal
