// PinnedCatalog::LoadPinned over a catalog that answers what each case
// needs: poison (a version gone, stored text that no longer decodes, a
// definition that no longer parses) fails the run closed with its reason;
// any other store error is returned unchanged, so the run is tried again
// instead of failed (issue 22.6).
#include "engine/service/pinned_catalog.h"

#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace runloom::engine_internal {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class OneAnswerCatalog final : public CatalogStore {
 public:
  absl::StatusOr<WorkflowVersion> RegisterWorkflow(const std::string&, const std::string&,
                                                   const nlohmann::json&) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<WorkflowVersion> GetWorkflow(const std::string&, int64_t) override {
    return answer;
  }
  absl::StatusOr<std::vector<WorkflowVersion>> ListWorkflows() override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<WorkflowVersion> answer = absl::UnknownError("unset");
};

TEST(PinnedCatalog, PoisonFailsClosedWithItsReasonAndAStoreErrorIsReturnedAsItIs) {
  OneAnswerCatalog catalog;
  SimulatedClock clock;
  PinnedCatalog pinned(&catalog, &clock);
  RunRecord run;
  run.id = "r_1";
  run.workflow_name = "wf";
  run.workflow_version = 1;
  run.workflow_digest = "sha256:ab";

  catalog.answer = absl::UnavailableError("PostgreSQL: server closed the connection");
  EXPECT_THAT(pinned.LoadPinned(run), StatusIs(absl::StatusCode::kUnavailable));
  catalog.answer = absl::InternalError("a statement failed");
  EXPECT_THAT(pinned.LoadPinned(run), StatusIs(absl::StatusCode::kInternal));

  catalog.answer = absl::NotFoundError("workflow wf has no version 1 in the catalog");
  EXPECT_THAT(pinned.LoadPinned(run),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("is not in the catalog"), HasSubstr("fails closed"))));
  catalog.answer = absl::DataLossError("corrupt JSON in workflow wf v1: unexpected end");
  EXPECT_THAT(pinned.LoadPinned(run),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("no longer decodes"), HasSubstr("unexpected end"))));
  catalog.answer = WorkflowVersion{.name = "wf",
                                   .version = 1,
                                   .digest = "sha256:ab",
                                   .canonical = {{"name", "wf"}, {"steps", 7}}};
  EXPECT_THAT(pinned.LoadPinned(run), StatusIs(absl::StatusCode::kFailedPrecondition,
                                               AllOf(HasSubstr("changed under its pinned digest"),
                                                     HasSubstr("fails closed"))));
}

}  // namespace
}  // namespace runloom::engine_internal
