// RUNLOOM_RETURN_IF_ERROR / RUNLOOM_ASSIGN_OR_RETURN, modeled on Abseil's
// status_macros.h, which Debian 12's Abseil (20220623) does not ship.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <utility>

#define RUNLOOM_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status runloom_status_ = (expr);           \
    if (!runloom_status_.ok()) return runloom_status_; \
  } while (0)

#define RUNLOOM_STATUS_CONCAT_INNER_(a, b) a##b
#define RUNLOOM_STATUS_CONCAT_(a, b) RUNLOOM_STATUS_CONCAT_INNER_(a, b)

#define RUNLOOM_ASSIGN_OR_RETURN(lhs, expr) \
  RUNLOOM_ASSIGN_OR_RETURN_IMPL_(RUNLOOM_STATUS_CONCAT_(runloom_statusor_, __LINE__), lhs, expr)

#define RUNLOOM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

namespace runloom {
// Prefixes `s`'s message with `context` (": " separated), keeping its code.
inline absl::Status Annotate(const absl::Status& s, std::string_view context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), std::string(context) + ": " + std::string(s.message()));
}
}  // namespace runloom
