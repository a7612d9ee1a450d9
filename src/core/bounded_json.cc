#include "core/bounded_json.h"

#include "core/status_macros.h"

#include "absl/strings/str_cat.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace runloom {
namespace {

// Thrown from the parser callback to stop parsing at the first value past a
// limit; caught below and never escapes this file.
struct LimitExceeded {
  absl::Status status;
};

constexpr char kLimitPayload[] = "runloom.dev/limit";

}  // namespace

absl::Status LimitError(absl::string_view source, absl::string_view what, absl::string_view limit,
                        int64_t value, absl::string_view fix) {
  absl::Status s = absl::InvalidArgumentError(
      absl::StrCat(source, ": ", what, " (limit ", limit, " = ", value, "); ", fix));
  s.SetPayload(kLimitPayload, absl::Cord(std::string(limit)));
  return s;
}

bool IsLimitError(const absl::Status& status) {
  return status.GetPayload(kLimitPayload).has_value();
}

LoadLimits StepOutputLimits() {
  LoadLimits l;
  l.max_bytes = int64_t{64} << 20;
  l.max_nodes = 1'000'000;
  return l;
}

absl::StatusOr<nlohmann::json> ParseJsonBounded(absl::string_view text, absl::string_view source,
                                                const LoadLimits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_bytes) {
    return LimitError(source, absl::StrCat(text.size(), " bytes of JSON"), "max_bytes",
                      limits.max_bytes, "send a smaller value");
  }
  int64_t nodes = 0;
  const auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::key || event == E::object_end || event == E::array_end) return true;
    if (++nodes > limits.max_nodes) {
      throw LimitExceeded{LimitError(source,
                                     absl::StrCat("more than ", limits.max_nodes, " values"),
                                     "max_nodes", limits.max_nodes, "send a smaller value")};
    }
    // `depth` counts the containers around this value; a new container
    // nests one deeper.
    if ((event == E::object_start || event == E::array_start) && depth + 1 > limits.max_depth) {
      throw LimitExceeded{
          LimitError(source, absl::StrCat("nesting deeper than ", limits.max_depth, " levels"),
                     "max_depth", limits.max_depth, "flatten the value")};
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), check);
  } catch (const LimitExceeded& e) {
    return e.status;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", e.what()));
  }
}

absl::StatusOr<std::string> ReadFileBounded(const std::string& path, absl::string_view what,
                                            const LoadLimits& limits) {
  const std::string name = absl::StrCat(what, " '", path, "'");
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(name, " not found"));
    return absl::InvalidArgumentError(
        absl::StrCat(name, " could not be read: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not a regular file"));
  }
  if (st.st_size > limits.max_bytes) {
    return LimitError(name, absl::StrCat("is ", st.st_size, " bytes"), "max_bytes",
                      limits.max_bytes, "split it into smaller files");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " could not be read; check its permissions"));
  }
  // Read one byte past the size stat() gave, to notice a file that grew.
  std::string text(static_cast<size_t>(st.st_size) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " could not be read"));
  }
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<int64_t>(text.size()) > st.st_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " changed while it was read; read it again when it is complete"));
  }
  return text;
}

absl::StatusOr<nlohmann::json> ReadJsonFileBounded(const std::string& path, absl::string_view what,
                                                   const LoadLimits& limits) {
  RUNLOOM_ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, what, limits));
  return ParseJsonBounded(text, absl::StrCat(what, " '", path, "'"), limits);
}

}  // namespace runloom
