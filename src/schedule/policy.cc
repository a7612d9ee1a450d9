#include "schedule/policy.h"

#include "absl/strings/ascii.h"
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

absl::Status CheckScheduleId(absl::string_view id) {
  const bool ok = !id.empty() && id.size() <= kMaxScheduleIdBytes &&
                  std::all_of(id.begin(), id.end(), [](char c) {
                    return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == ':' || c == '-';
                  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("'", id.substr(0, kMaxScheduleIdBytes), "': 1 to ",
                                                 kMaxScheduleIdBytes, " of A-Z a-z 0-9 _ . : -"));
}

absl::Status CheckOverlapPolicy(absl::string_view value) {
  static constexpr std::array<absl::string_view, 3> kOverlap = {"skip", "allow", "cancel"};
  return OneOf(value, kOverlap);
}

absl::Status CheckCatchUpPolicy(absl::string_view value) {
  static constexpr std::array<absl::string_view, 3> kCatchUp = {"none", "latest", "all"};
  return OneOf(value, kCatchUp);
}

}  // namespace runloom
