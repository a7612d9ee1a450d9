#include "workflow/internal/schedules.h"

#include "core/status_macros.h"
#include "workflow/inputs.h"
#include "workflow/internal/yaml_json.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedule/cron.h"
#include "schedule/fire_time.h"
#include "schedule/policy.h"

#include <algorithm>
#include <map>
#include <utility>

namespace runloom {
namespace {

// A stored schedule's id is at most this long (ScheduleRecord::id).
constexpr size_t kMaxEntryNameBytes = 64;

constexpr char kExample[] =
    "e.g. schedules: [{name: nightly, cron: \"0 2 * * *\", timezone: Europe/Paris}]";

bool IsEntryName(const std::string& s) {
  if (s.empty() || s.size() > kMaxEntryNameBytes) return false;
  if (!absl::ascii_islower(static_cast<unsigned char>(s[0])) &&
      !absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_islower(static_cast<unsigned char>(c)) ||
           absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

// "schedules[2]", or "schedules[2] 'nightly'" for a named entry.
std::string Entry(size_t index, const std::string& name) {
  return absl::StrCat("schedules[", index, "]", name.empty() ? "" : absl::StrCat(" '", name, "'"));
}

}  // namespace

std::string DeclaredScheduleName(const ScheduleDef& def, size_t index) {
  return def.name.empty() ? absl::StrCat(index) : def.name;
}

std::string DeclaredScheduleId(const std::string& workflow, const std::string& entry_name) {
  return absl::StrCat(kDeclaredSchedulePrefix, workflow, ":", entry_name);
}

namespace workflow_internal {
namespace {

const std::vector<std::string> kEntryKeys = {"name",   "cron",    "timezone",
                                             "inputs", "overlap", "catch_up"};

// A text field of an entry: absent leaves `out` as it is.
absl::Status ReadField(const std::string& source, const YAML::Node& entry, const std::string& key,
                       const std::string& what, std::string& out) {
  const YAML::Node& c = entry;
  const YAML::Node v = c[key];
  if (!v.IsDefined() || v.IsNull()) return absl::OkStatus();
  if (!v.IsScalar()) {
    return ErrorAt(source, v,
                   absl::StrCat(what, ": ", key, " must be text, not a ",
                                v.IsMap() ? "mapping" : "list", "; ", kExample));
  }
  out = v.Scalar();
  return absl::OkStatus();
}

absl::StatusOr<ScheduleDef> ParseEntry(const std::string& source, const YAML::Node& n,
                                       size_t index) {
  if (!n.IsMap()) {
    return ErrorAt(source, n, absl::StrCat("schedules[", index, "] must be a mapping; ", kExample));
  }
  ScheduleDef def;
  const std::string at = absl::StrCat("schedules[", index, "]");
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (std::find(kEntryKeys.begin(), kEntryKeys.end(), it->first.Scalar()) == kEntryKeys.end()) {
      return ErrorAt(source, it->first,
                     absl::StrCat(at, " does not take '", it->first.Scalar(), "'; use ",
                                  absl::StrJoin(kEntryKeys, ", ")));
    }
  }
  RUNLOOM_RETURN_IF_ERROR(ReadField(source, n, "name", at, def.name));
  const std::string what = Entry(index, def.name);
  for (const auto& [key, field] :
       {std::pair{"cron", &ScheduleDef::cron}, std::pair{"timezone", &ScheduleDef::timezone},
        std::pair{"overlap", &ScheduleDef::overlap},
        std::pair{"catch_up", &ScheduleDef::catch_up}}) {
    RUNLOOM_RETURN_IF_ERROR(ReadField(source, n, key, what, def.*field));
  }
  const YAML::Node& c = n;
  if (!c["cron"].IsDefined() || c["cron"].IsNull()) {
    return ErrorAt(
        source, n,
        absl::StrCat(what, ": cron is missing; write it in quotes, e.g. cron: \"*/5 * * * *\""));
  }
  if (const YAML::Node v = c["inputs"]; v.IsDefined() && !v.IsNull()) {
    if (!v.IsMap()) {
      return ErrorAt(source, v, absl::StrCat(what, ": inputs must be a mapping of input -> value"));
    }
    def.inputs = YamlToJson(v);
  }
  // Loaded where the file is loaded (see ParseSchedules in the header).
  if (absl::StatusOr<absl::TimeZone> zone = LoadScheduleTimeZone(def.timezone); !zone.ok()) {
    const YAML::Node v = c["timezone"];
    return ErrorAt(source, v.IsDefined() ? v : n,
                   absl::StrCat(what, ": timezone: ", zone.status().message()));
  }
  return def;
}

}  // namespace

absl::StatusOr<std::vector<ScheduleDef>> ParseSchedules(const YAML::Node& n,
                                                        const std::string& source) {
  std::vector<ScheduleDef> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) {
    return ErrorAt(source, n, absl::StrCat("schedules must be a list; ", kExample));
  }
  if (n.size() > kMaxWorkflowSchedules) {
    return ErrorAt(
        source, n,
        absl::StrCat("schedules lists ", n.size(), " entries; a workflow declares at most ",
                     kMaxWorkflowSchedules, " (create more with runloom schedule create)"));
  }
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node& seq = n;
    RUNLOOM_ASSIGN_OR_RETURN(ScheduleDef def, ParseEntry(source, seq[i], i));
    out.push_back(std::move(def));
  }
  return out;
}

absl::Status CheckSchedules(const Workflow& wf, const FailAt& fail) {
  if (wf.schedules.size() > kMaxWorkflowSchedules) {
    return fail({nullptr, {"schedules"}},
                absl::StrCat("schedules lists ", wf.schedules.size(),
                             " entries; a workflow declares at most ", kMaxWorkflowSchedules));
  }
  std::map<std::string, size_t> names;  // entry name -> its index
  for (size_t i = 0; i < wf.schedules.size(); ++i) {
    const ScheduleDef& def = wf.schedules[i];
    const std::string what = Entry(i, def.name);
    auto at = [&](const char* field) {
      return Location{nullptr, {"schedules", absl::StrCat(i), field}};
    };
    if (!def.name.empty() && !IsEntryName(def.name)) {
      return fail(at("name"), absl::StrCat(what, ": bad name; use 1 to ", kMaxEntryNameBytes,
                                           " lower-case letters, digits, '_' and '-', starting "
                                           "with a letter or digit, e.g. name: nightly"));
    }
    const std::string name = DeclaredScheduleName(def, i);
    if (auto [it, added] = names.emplace(name, i); !added) {
      return fail(at("name"),
                  absl::StrCat(what, ": the name '", name, "' is taken by schedules[", it->second,
                               "] (an entry without name: is named by its index); "
                               "give each entry a distinct name:"));
    }
    if (const std::string id = DeclaredScheduleId(wf.name, name); id.size() > kMaxScheduleIdBytes) {
      return fail(at("name"), absl::StrCat(what, ": its schedule id '", id, "' is longer than ",
                                           kMaxScheduleIdBytes,
                                           " characters; shorten the entry's name or the "
                                           "workflow's"));
    }
    if (absl::StatusOr<CronSpec> spec = CronSpec::Parse(def.cron); !spec.ok()) {
      return fail(at("cron"), absl::StrCat(what, ": cron: ", spec.status().message()));
    }
    if (absl::Status s = CheckOverlapPolicy(def.overlap); !s.ok()) {
      return fail(at("overlap"), absl::StrCat(what, ": overlap: ", s.message()));
    }
    if (absl::Status s = CheckCatchUpPolicy(def.catch_up); !s.ok()) {
      return fail(at("catch_up"), absl::StrCat(what, ": catch_up: ", s.message()));
    }
    if (absl::Status s = CheckScheduleInputs(wf, def.inputs); !s.ok()) {
      return fail(at("inputs"), absl::StrCat(what, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace workflow_internal
}  // namespace runloom
