#include "core/log_line.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace runloom {
namespace {

// ISO 8601, UTC, milliseconds: 2026-12-05T22:10:03.123Z.
std::string Timestamp(absl::Time at) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", at, absl::UTCTimeZone());
}

// `text` with control characters written out, so it stays on its line.
void AppendOneLine(std::string& out, std::string_view text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", u);
    } else {
      out += c;
    }
  }
}

std::string TextLine(absl::Time at, LogLevel level, std::string_view message,
                     const LogFields& fields) {
  std::string out = Timestamp(at);
  out += " [runloom] [";
  out += ToString(level);
  out += "] ";
  AppendOneLine(out, message);
  auto field = [&out](std::string_view name, std::string_view value) {
    if (value.empty()) return;
    out += ' ';
    out += name;
    out += '=';
    AppendOneLine(out, value);
  };
  field("run_id", fields.run_id);
  field("step", fields.step);
  if (fields.attempt > 0) absl::StrAppend(&out, " attempt=", fields.attempt);
  field("worker", fields.worker);
  return out;
}

std::string JsonLine(absl::Time at, LogLevel level, std::string_view message,
                     const LogFields& fields) {
  // ordered_json: ts, level and msg first, as documented.
  nlohmann::ordered_json line;
  line["ts"] = Timestamp(at);
  line["level"] = ToString(level);
  line["msg"] = message;
  if (!fields.run_id.empty()) line["run_id"] = fields.run_id;
  if (!fields.step.empty()) line["step"] = fields.step;
  if (fields.attempt > 0) line["attempt"] = fields.attempt;
  if (!fields.worker.empty()) line["worker"] = fields.worker;
  // dump() escapes control characters; `replace` keeps a line whose message
  // is not UTF-8 (a step's stderr) instead of throwing.
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

std::string FormatLogLine(LogFormat format, absl::Time at, LogLevel level, std::string_view message,
                          const LogFields& fields) {
  switch (format) {
    case LogFormat::kText:
      return TextLine(at, level, message, fields);
    case LogFormat::kJson:
      return JsonLine(at, level, message, fields);
  }
  return TextLine(at, level, message, fields);
}

}  // namespace runloom
