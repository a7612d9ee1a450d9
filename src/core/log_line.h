// The text of one log line in each LogFormat (runloom/env.h), apart from
// where it is written, so a test can check the format without a terminal.
#pragma once

#include "runloom/env.h"

#include "absl/time/time.h"

#include <string>
#include <string_view>

namespace runloom {

// `message` at `level`, logged at `at`, about `fields`, as one line without
// its trailing newline: a newline or other control character in `message` or
// a field never splits the line (kJson escapes it; kText writes \n, \r, \t
// and \xHH). Bytes that are not UTF-8 are replaced in kJson.
std::string FormatLogLine(LogFormat format, absl::Time at, LogLevel level, std::string_view message,
                          const LogFields& fields);

}  // namespace runloom
