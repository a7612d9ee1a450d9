#include "workflow/internal/yaml_bounds.h"

#include "core/bounded_json.h"

#include "absl/strings/str_cat.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/exceptions.h"
#include "yaml-cpp/parser.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace runloom::workflow_internal {
namespace {

// Thrown from the event handler to stop the parser at the first node past a
// limit (or at a recursive alias); caught in CheckYamlBounds.
struct LimitExceeded {
  absl::Status status;
};

class BoundsHandler : public YAML::EventHandler {
 public:
  BoundsHandler(const std::string& source, const LoadLimits& limits)
      : source_(source), limits_(limits) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    Leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    // yaml-cpp resolves an alias inside its own anchor's node (`&a [*a]`) to
    // that node: a cycle, which every recursive walk after YAML::Load follows
    // until the stack overflows. Refused here, while the anchor is open.
    for (const Frame& f : open_) {
      if (f.anchor != YAML::NullAnchor && f.anchor == anchor) {
        throw LimitExceeded{absl::InvalidArgumentError(
            absl::StrCat(At(mark),
                         ": an alias is used inside the node its anchor names, which "
                         "makes the value contain itself; use the alias after that node"))};
      }
    }
    // An unknown anchor is a syntax error the loader reports.
    const Subtree t = anchor < anchors_.size() ? anchors_[anchor] : Subtree{1, 0};
    Add(mark, t.nodes);
    CheckDepth(mark, static_cast<int>(open_.size()) + t.height);
    Child(t.height);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Subtree {
    int64_t nodes = 0;
    int height = 0;  // 0 for a scalar, 1 for a container of scalars
  };
  struct Frame {
    YAML::anchor_t anchor;
    int64_t nodes_before;  // count_ before the container itself
    int height = 1;
  };

  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    Add(mark, 1);
    Define(anchor, Subtree{1, 0});
    Child(0);
  }
  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    const int64_t before = count_;
    Add(mark, 1);
    open_.push_back(Frame{anchor, before});
    CheckDepth(mark, static_cast<int>(open_.size()));
  }
  void Close() {
    const Frame f = open_.back();
    open_.pop_back();
    Define(f.anchor, Subtree{count_ - f.nodes_before, f.height});
    Child(f.height);
  }
  // yaml-cpp numbers anchors 1, 2, ... as they are defined; one slot each
  // (an anchor is defined on a node, so there are no more than max_nodes).
  void Define(YAML::anchor_t anchor, Subtree t) {
    if (anchor == YAML::NullAnchor) return;
    if (anchor >= anchors_.size()) anchors_.resize(anchor + 1, Subtree{1, 0});
    anchors_[anchor] = t;
  }
  // A finished child of `height` raises its parent's height.
  void Child(int height) {
    if (!open_.empty()) open_.back().height = std::max(open_.back().height, height + 1);
  }
  void Add(const YAML::Mark& mark, int64_t nodes) {
    count_ += nodes;
    if (count_ > limits_.max_nodes) {
      throw LimitExceeded{LimitError(
          At(mark), absl::StrCat("more than ", limits_.max_nodes, " values with aliases expanded"),
          "max_nodes", limits_.max_nodes, "use fewer values or fewer aliases")};
    }
  }
  void CheckDepth(const YAML::Mark& mark, int depth) {
    if (depth > limits_.max_depth) {
      throw LimitExceeded{LimitError(
          At(mark),
          absl::StrCat("nesting deeper than ", limits_.max_depth, " levels with aliases expanded"),
          "max_depth", limits_.max_depth, "flatten the structure")};
    }
  }
  std::string At(const YAML::Mark& mark) const { return absl::StrCat(source_, ":", mark.line + 1); }

  const std::string& source_;
  const LoadLimits& limits_;
  int64_t count_ = 0;
  std::vector<Frame> open_;
  std::vector<Subtree> anchors_;
};

}  // namespace

absl::Status CheckYamlBounds(absl::string_view text, const std::string& source,
                             const LoadLimits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_bytes) {
    return LimitError(source, absl::StrCat("is ", text.size(), " bytes"), "max_bytes",
                      limits.max_bytes, "split it into smaller files");
  }
  std::istringstream in{std::string(text)};
  BoundsHandler handler(source, limits);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(handler)) {
    }
  } catch (const LimitExceeded& e) {
    return e.status;
  } catch (const YAML::Exception&) {
    // A syntax error: YAML::Load reports it with its position.
  }
  return absl::OkStatus();
}

}  // namespace runloom::workflow_internal
