// Budget figures and reservation state names (runloom/budget_ledger.h).
#include "runloom/budget_ledger.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace runloom {
namespace {

constexpr int64_t kMicrosPerUnit = 1'000'000;
constexpr size_t kMaxFractionDigits = 6;
constexpr size_t kMaxIntegerDigits = 12;  // up to 10^12 price units: no overflow

bool AllDigits(std::string_view s) { return s.find_first_not_of("0123456789") == s.npos; }

}  // namespace

// By hand, not strtod: an amount is exact in micro-units, and a binary
// double would round "0.000003" and friends.
std::optional<int64_t> ParseAmountMicros(std::string_view text) {
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view frac = dot == text.npos ? std::string_view() : text.substr(dot + 1);
  if (whole.empty() || whole.size() > kMaxIntegerDigits || !AllDigits(whole) || !AllDigits(frac) ||
      frac.size() > kMaxFractionDigits || (dot != text.npos && frac.empty())) {
    return std::nullopt;
  }
  int64_t units = 0;
  for (char ch : whole) units = units * 10 + (ch - '0');
  int64_t fraction = 0;
  for (size_t i = 0; i < kMaxFractionDigits; ++i) {
    fraction = fraction * 10 + (i < frac.size() ? frac[i] - '0' : 0);
  }
  return units * kMicrosPerUnit + fraction;
}

std::string FormatAmountMicros(int64_t micros) {
  const bool negative = micros < 0;
  const uint64_t abs = negative ? 0 - static_cast<uint64_t>(micros) : static_cast<uint64_t>(micros);
  std::string frac = absl::StrFormat("%06d", abs % kMicrosPerUnit);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return absl::StrCat(negative ? "-" : "", abs / kMicrosPerUnit, frac.empty() ? "" : ".", frac);
}

std::optional<int64_t> BudgetFigures::left_micros() const {
  if (!limit_micros.has_value()) return std::nullopt;
  return *limit_micros - spent_micros - reserved_micros;
}

bool BudgetFigures::Admits(int64_t amount_micros) const {
  const std::optional<int64_t> left = left_micros();
  return !left.has_value() || amount_micros <= *left;
}

std::string_view ToString(ReservationState s) {
  switch (s) {
    case ReservationState::kReserved:
      return "reserved";
    case ReservationState::kSettled:
      return "settled";
    case ReservationState::kReleased:
      return "released";
  }
  return "unknown";
}

std::optional<ReservationState> ParseReservationState(std::string_view s) {
  if (s == "reserved") return ReservationState::kReserved;
  if (s == "settled") return ReservationState::kSettled;
  if (s == "released") return ReservationState::kReleased;
  return std::nullopt;
}

}  // namespace runloom
