// Status matchers for tests: EXPECT_OK, ASSERT_OK, StatusIs(code), StatusIs(code, m),
// IsOk(), IsOkAndHolds(m).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>

namespace runloom::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER_P(StatusIs, code, "has status code " + absl::StatusCodeToString(code)) {
  const absl::Status& s = ::runloom::testing::GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code;
}

// StatusIs(code, message_matcher), e.g. StatusIs(kInvalidArgument, HasSubstr("limit")).
MATCHER_P2(StatusIs, code, message_matcher,
           "has status code " + absl::StatusCodeToString(code) + " and a matching message") {
  const absl::Status& s = ::runloom::testing::GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()), result_listener);
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = ::runloom::testing::GetStatus(arg);
  *result_listener << "status is " << s;
  return s.ok();
}

MATCHER_P(IsOkAndHolds, m, "is OK and holds a value that matches") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(m, *arg, result_listener);
}

}  // namespace runloom::testing

#define EXPECT_OK(expr) \
  EXPECT_TRUE(::runloom::testing::GetStatus(expr).ok()) << ::runloom::testing::GetStatus(expr)
#define ASSERT_OK(expr) \
  ASSERT_TRUE(::runloom::testing::GetStatus(expr).ok()) << ::runloom::testing::GetStatus(expr)
