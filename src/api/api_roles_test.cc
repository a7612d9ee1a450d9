// Every route of the table, with no token (401) and with the token of the
// role just below the one it names (403); nothing is written either way.
#include "api/api.h"
#include "testing/api_test_util.h"

#include "absl/strings/str_replace.h"

namespace runloom::api::testing {
namespace {

std::string TokenBelow(Role need) {
  switch (need) {
    case Role::kOperator:
      return "viewer-token";
    case Role::kApprover:
      return "operator-token";
    case Role::kAdmin:
      return "approver-token";
    case Role::kViewer:
      break;
  }
  return "";
}

TEST_F(ApiTest, EveryRouteRefusesNoTokenAndTheRoleBelowItsOwn) {
  RunRecord paused = StartAndAwait("gated");
  const int64_t seq_before = engine()->GetRun(paused.id)->last_event_seq;
  Api table(engine(), nullptr, nullptr);
  int checked = 0;
  for (const Route& r : table.routes()) {
    if (!r.role) continue;
    const std::string target =
        absl::StrReplaceAll(r.pattern, {{"{id}", paused.id}, {"{name}", "gated"}, {"{file}", "x"}});
    const std::string body = r.method == "POST" ? "{}" : "";
    ClientResponse none = Request(port(), r.method, target, body, "");
    EXPECT_EQ(none.status, 401) << r.method << " " << r.pattern;
    EXPECT_EQ(none.json().value("code", ""), "unauthenticated") << r.pattern;
    const std::string below = TokenBelow(*r.role);
    if (!below.empty()) {
      ClientResponse low = Request(port(), r.method, target, body, below);
      EXPECT_EQ(low.status, 403) << r.method << " " << r.pattern << " with " << below;
      EXPECT_EQ(low.json().value("code", ""), "forbidden") << r.pattern;
    }
    ++checked;
  }
  EXPECT_GE(checked, 18);
  EXPECT_EQ(CountRuns(), 1);
  EXPECT_EQ(engine()->GetRun(paused.id)->last_event_seq, seq_before);
  EXPECT_EQ(engine()->GetRun(paused.id)->status, RunStatus::kPaused);
  EXPECT_EQ(engine()->ListWorkflows()->size(), 3u);
}

TEST_F(ApiTest, OversizedBodiesAre413OnEveryPostRoute) {
  RunRecord paused = StartAndAwait("gated");
  const int64_t seq_before = engine()->GetRun(paused.id)->last_event_seq;
  const std::string big = R"({"digest": ")" + std::string((1 << 20) + 1, 'x') + R"("})";
  Api table(engine(), nullptr, nullptr);
  for (const Route& r : table.routes()) {
    if (r.method != "POST") continue;
    const std::string target =
        absl::StrReplaceAll(r.pattern, {{"{id}", paused.id}, {"{name}", "gated"}});
    ClientResponse res = Request(port(), r.method, target, big, "admin-token");
    EXPECT_EQ(res.status, 413) << r.pattern;
  }
  EXPECT_EQ(engine()->GetRun(paused.id)->last_event_seq, seq_before);
  EXPECT_EQ(engine()->GetRun(paused.id)->status, RunStatus::kPaused);
  EXPECT_EQ(CountRuns(), 1);
}

}  // namespace
}  // namespace runloom::api::testing
