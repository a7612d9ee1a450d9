#include "store/internal/sql.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace runloom::store_internal {

std::string SqlRow::ColumnText(int col) const {
  const SqlValue& v = cells_[col];
  if (const std::string* s = std::get_if<std::string>(&v)) return *s;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return absl::StrCat(*i);
  return std::string();
}

int64_t SqlRow::ColumnInt(int col) const {
  const SqlValue& v = cells_[col];
  if (const int64_t* i = std::get_if<int64_t>(&v)) return *i;
  const std::string* s = std::get_if<std::string>(&v);
  if (s == nullptr) return 0;
  if (*s == "t") return 1;  // a PostgreSQL boolean
  if (*s == "f") return 0;
  int64_t out = 0;
  return absl::SimpleAtoi(*s, &out) ? out : 0;
}

}  // namespace runloom::store_internal
