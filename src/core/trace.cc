#include "runloom/trace.h"

#include "core/digest.h"
#include "core/escape.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <vector>

namespace runloom {
namespace {

// W3C Trace Context ids and fields are lower-case hex only.
bool IsHexDigit(char c) { return HexValue(c) >= 0 && !(c >= 'A' && c <= 'F'); }

// `n` lower-case hex digits, not all zero.
bool IsLowerHexId(absl::string_view s, size_t n) {
  if (s.size() != n) return false;
  bool nonzero = false;
  for (char c : s) {
    if (!IsHexDigit(c)) return false;
    nonzero |= c != '0';
  }
  return nonzero;
}

bool IsHexByte(absl::string_view s) {
  return s.size() == 2 && IsHexDigit(s[0]) && IsHexDigit(s[1]);
}

}  // namespace

std::string TraceIdOf(std::string_view run_id) {
  return Sha256Hex("runloom trace " + std::string(run_id)).substr(0, 32);
}

std::string SpanIdOf(std::string_view name) {
  std::string id = Sha256Hex(name).substr(0, 16);
  // All zero is not a span id; SHA-256 gives one once in 2^64.
  if (id == std::string(16, '0')) id[15] = '1';
  return id;
}

std::string RunSpanIdOf(std::string_view run_id, int64_t revision) {
  return SpanIdOf(absl::StrCat("runloom run ", std::string(run_id), "/", revision));
}

std::string TraceParentOf(const TraceContext& context) {
  return absl::StrCat("00-", context.trace_id, "-", context.span_id, "-01");
}

}  // namespace runloom

namespace runloom {

std::optional<TraceContext> ParseTraceParent(std::string_view text) {
  // absl::string_view: Debian's Abseil has its own, not std's.
  const absl::string_view header =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (header.size() > 512) return std::nullopt;  // a version-00 header is 55 bytes
  std::vector<absl::string_view> parts = absl::StrSplit(header, '-');
  if (parts.size() < 4 || !IsHexByte(parts[0]) || parts[0] == "ff") return std::nullopt;
  // Version 00 has exactly four fields; a later version may add more.
  if (parts[0] == "00" && parts.size() != 4) return std::nullopt;
  if (!IsLowerHexId(parts[1], 32) || !IsLowerHexId(parts[2], 16) || !IsHexByte(parts[3])) {
    return std::nullopt;
  }
  return TraceContext{.trace_id = std::string(parts[1]), .span_id = std::string(parts[2])};
}

}  // namespace runloom
