#include "engine/rules/child_signal.h"

namespace runloom::engine_internal {
namespace {
constexpr std::string_view kPrefix = "_child.";
}  // namespace

std::string ChildSignalName(std::string_view child_run_id) {
  std::string name(kPrefix);
  name += child_run_id;
  return name;
}

std::string ChildOfSignal(std::string_view signal_name) {
  if (signal_name.size() <= kPrefix.size() || signal_name.substr(0, kPrefix.size()) != kPrefix) {
    return "";
  }
  return std::string(signal_name.substr(kPrefix.size()));
}

}  // namespace runloom::engine_internal
