// Hex digits and percent-encoding, for text that arrives from outside
// (query strings, OTEL_EXPORTER_OTLP_HEADERS, W3C traceparent headers).
// Written by hand: a table lookup and a loop; Boost.URL, the library that
// does this, is newer than Debian 12's Boost.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace runloom {

// The value of hex digit `c` (either case), or -1.
int HexValue(char c);

// Percent-decodes `s` ('+' is a space when `plus_is_space`, as in a query);
// nullopt when a '%' is not followed by two hex digits.
std::optional<std::string> PercentDecode(std::string_view s, bool plus_is_space);

}  // namespace runloom
