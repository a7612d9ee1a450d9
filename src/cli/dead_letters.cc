// `runloom dead-letters`: the queue messages the transport stopped
// delivering, listed, or redriven one by one or all at once.
#include "runloom/engine.h"
#include "runloom/events.h"

#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "wire/wire.h"

#include <algorithm>
#include <iostream>

namespace runloom::cli {
namespace {

int Redrive(Engine& engine, const DeadLettersFlags& f) {
  absl::Status s = engine.RedriveDeadLetter(f.redrive);
  if (s.code() == absl::StatusCode::kNotFound) {
    return BadInput(absl::StrCat("dead letter '", f.redrive, "' not found in ",
                                 RedactedUrl(f.common.db),
                                 " (unknown, or redriven already); list them with: runloom "
                                 "dead-letters",
                                 BackendArgs(f.common)));
  }
  if (!s.ok()) return ExitForError(s);
  if (f.json) {
    std::cout << nlohmann::json{{"redriven", 1}, {"id", f.redrive}}.dump() << "\n";
  } else {
    std::cout << "dead letter " << f.redrive << " redriven; a worker executes its run: "
              << "runloom worker" << BackendArgs(f.common) << "\n";
  }
  return kExitCompleted;
}

int RedriveAll(Engine& engine, const DeadLettersFlags& f) {
  absl::StatusOr<int> n = engine.RedriveAllDeadLetters();
  if (!n.ok()) return Failure(std::string(n.status().message()));
  if (f.json) {
    std::cout << nlohmann::json{{"redriven", *n}}.dump() << "\n";
  } else {
    std::cout << "redriven " << *n << " dead letters\n";
  }
  return kExitCompleted;
}

}  // namespace

int DeadLettersCommand(const DeadLettersFlags& f) {
  if (f.limit < 1 || f.limit > kMaxReadLimit) {
    return BadInput(
        absl::StrCat("--limit must be from 1 to ", kMaxReadLimit, " (got ", f.limit, ")"));
  }
  auto engine = OpenEngine(f.common);
  if (!engine.ok()) return DbOpenFailure(f.common, engine.status());
  if (!f.redrive.empty()) return Redrive(**engine, f);
  if (f.redrive_all) return RedriveAll(**engine, f);
  // One more than asked: whether it comes back says if the list was cut.
  absl::StatusOr<std::vector<DeadLetter>> list =
      (*engine)->ListDeadLetters(std::min(f.limit + 1, kMaxReadLimit));
  if (!list.ok()) return Failure(std::string(list.status().message()));
  const bool more = static_cast<int>(list->size()) > f.limit;
  if (more) list->resize(f.limit);
  if (f.json) {
    nlohmann::json out = {{"dead_letters", nlohmann::json::array()}, {"more", more}};
    for (const DeadLetter& d : *list) out["dead_letters"].push_back(wire::DeadLetterToJson(d));
    std::cout << out.dump(2) << "\n";
    return kExitCompleted;
  }
  if (list->empty()) {
    std::cout << "no dead letters\n";
    return kExitCompleted;
  }
  constexpr char kRow[] = "%-8s  %-24s  %-8s  %10s  %-27s  %s\n";
  std::cout << absl::StrFormat(kRow, "ID", "RUN", "MESSAGE", "DELIVERIES", "AT", "REASON");
  for (const DeadLetter& d : *list) {
    std::cout << absl::StrFormat(kRow, d.id, d.run_id, d.message_id, absl::StrCat(d.deliveries),
                                 FormatEventTime(d.at), FirstLine(d.reason));
  }
  if (more) {
    std::cout << "more dead letters than --limit " << f.limit << "; redrive these or raise it\n";
  }
  return kExitCompleted;
}

}  // namespace runloom::cli
