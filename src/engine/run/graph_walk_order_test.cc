// The graph walk's pure part: dependencies and the order steps become ready.
#include "engine/run/graph_walk.h"

#include "gtest/gtest.h"

namespace runloom::engine_internal {
namespace {

StepDef Step(const std::string& id, std::vector<std::string> needs = {},
             bool explicit_needs = false) {
  StepDef s;
  s.id = id;
  s.needs = std::move(needs);
  s.explicit_needs = explicit_needs;
  return s;
}

TEST(GraphWalk, ImplicitNeedsIsThePreviousSibling) {
  auto deps = StepDependencies({Step("a"), Step("b"), Step("c")});
  EXPECT_EQ(deps, (std::vector<std::vector<size_t>>{{}, {0}, {1}}));
}

TEST(GraphWalk, ExplicitNeedsEvenEmpty) {
  auto deps = StepDependencies({Step("a"), Step("b", {}, true), Step("c", {"a", "b"})});
  EXPECT_EQ(deps, (std::vector<std::vector<size_t>>{{}, {}, {0, 1}}));
}

TEST(GraphWalk, NextReadyStepIsTheFirstReadyInDeclarationOrder) {
  // c needs b (declared later), b needs a.
  std::vector<std::vector<size_t>> deps = {{}, {2}, {0}};
  std::vector<bool> done = {false, false, false};
  EXPECT_EQ(NextReadyStep(deps, done), 0u);
  done[0] = true;
  EXPECT_EQ(NextReadyStep(deps, done), 2u);
  done[2] = true;
  EXPECT_EQ(NextReadyStep(deps, done), 1u);
  done[1] = true;
  EXPECT_EQ(NextReadyStep(deps, done), 3u);  // none left
}

TEST(GraphWalk, NoReadyStepInACycle) {
  std::vector<std::vector<size_t>> deps = {{1}, {0}};
  EXPECT_EQ(NextReadyStep(deps, {false, false}), 2u);
}

}  // namespace
}  // namespace runloom::engine_internal
