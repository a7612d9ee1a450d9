#include "schedule/policy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <array>
#include <string>

namespace runloom {
namespace {

template <size_t N>
absl::Status OneOf(absl::string_view value, const std::array<absl::string_view, N>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", value, "'; allowed: ", absl::StrJoin(allowed, ", ")));
}

}  // namespace

absl::Status CheckOverlapPolicy(absl::string_view value) {
  static constexpr std::array<absl::string_view, 3> kOverlap = {"skip", "allow", "cancel"};
  return OneOf(value, kOverlap);
}

absl::Status CheckCatchUpPolicy(absl::string_view value) {
  static constexpr std::array<absl::string_view, 3> kCatchUp = {"none", "latest", "all"};
  return OneOf(value, kCatchUp);
}

}  // namespace runloom
