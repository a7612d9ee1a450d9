// `runloom budgets` (commands.h): the budget ledger per tenant.
#include "runloom/budget_ledger.h"

#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

#include <iostream>
#include <optional>

namespace runloom::cli {
namespace {

nlohmann::json OptionalMicros(const std::optional<int64_t>& v) {
  return v.has_value() ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string OptionalUnits(const std::optional<int64_t>& v) {
  return v.has_value() ? FormatAmountMicros(*v) : "-";
}

}  // namespace

absl::StatusOr<int64_t> BudgetFlag(const char* flag, const std::string& value) {
  if (std::optional<int64_t> micros = ParseAmountMicros(value)) return *micros;
  return absl::InvalidArgumentError(absl::StrCat(
      flag, " '", absl::CHexEscape(value.substr(0, 40)),
      "' is not an amount; give price units as digits with up to 6 decimals, e.g. 2.50"));
}

int BudgetsCommand(const CommonFlags& c, const std::string& config, bool json) {
  auto backend = OpenExistingDb(c);
  if (!backend.ok()) return DbOpenFailure(c, backend.status());
  Store& store = *backend->store;
  if (absl::Status s = ApplyTenantBudgets(config, store); !s.ok()) {
    return s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kNotFound
               ? BadInput(std::string(s.message()))
               : Failure(std::string(s.message()));
  }
  auto tenants = store.ListTenantBudgets();
  if (!tenants.ok()) return Failure(std::string(tenants.status().message()));
  if (json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const TenantBudget& t : *tenants) {
      arr.push_back({{"tenant", t.tenant},
                     {"limit_micros", OptionalMicros(t.figures.limit_micros)},
                     {"spent_micros", t.figures.spent_micros},
                     {"reserved_micros", t.figures.reserved_micros},
                     {"left_micros", OptionalMicros(t.figures.left_micros())}});
    }
    std::cout << arr.dump(2) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat("%-24s %14s %14s %14s %14s\n", "TENANT", "LIMIT", "SPENT",
                               "RESERVED", "LEFT");
  for (const TenantBudget& t : *tenants) {
    std::cout << absl::StrFormat(
        "%-24s %14s %14s %14s %14s\n", t.tenant, OptionalUnits(t.figures.limit_micros),
        FormatAmountMicros(t.figures.spent_micros), FormatAmountMicros(t.figures.reserved_micros),
        OptionalUnits(t.figures.left_micros()));
  }
  return 0;
}

}  // namespace runloom::cli
