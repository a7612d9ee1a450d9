// Budget figures and reservation state names (runloom/budget_ledger.h).
#include "runloom/budget_ledger.h"

namespace runloom {

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
