// PruneCommand (commands.h): `runloom prune --older-than AGE` (issue 25):
// what the retention sweep does (engine/service/retention_sweep.h), once,
// on demand, on any backend the other commands open.
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/duration.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

#include <iostream>

namespace runloom::cli {
namespace {

// Runs per transaction, as the sweep's default (RetentionPolicy::batch_runs):
// each batch is one short transaction, so the runs executing meanwhile wait
// for the store's writer only briefly.
constexpr int kBatchRuns = 100;

// `value` of `flag` as a retention age; `none` is accepted only where
// `none_ok` (InfiniteDuration()).
absl::StatusOr<absl::Duration> AgeFlag(const char* flag, const std::string& value, bool none_ok) {
  if (none_ok && value == "none") return absl::InfiniteDuration();
  absl::StatusOr<absl::Duration> d = ParseAge(value);
  if (!d.ok() || *d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", value, "': write a positive age such as 30d, 12h or 90m",
                     none_ok ? ", or none" : ""));
  }
  return *d;
}

}  // namespace

int PruneCommand(const PruneFlags& f) {
  // Every flag is checked before the backend is opened: a bad one deletes nothing.
  absl::StatusOr<absl::Duration> older = AgeFlag("--older-than", f.older_than, false);
  if (!older.ok()) return BadInput(std::string(older.status().message()));
  absl::StatusOr<absl::Duration> audit = AgeFlag("--audit-horizon", f.audit_horizon, true);
  if (!audit.ok()) return BadInput(std::string(audit.status().message()));
  absl::StatusOr<Backend> backend = OpenExistingDb(f.common);
  if (!backend.ok()) return DbOpenFailure(f.common, backend.status());
  Store& store = *backend->store;
  // The cutoffs by the store's clock (its time authority), as the sweep's.
  absl::StatusOr<absl::Time> now = store.Now();
  if (!now.ok()) return Failure(absl::StrCat("prune: ", now.status().message()));
  PruneRequest request{
      .finished_before = *now - *older,
      .audit_before = *audit == absl::InfiniteDuration() ? absl::InfinitePast() : *now - *audit,
      .workflow_name = f.workflow,
      .limit = f.dry_run ? 0 : kBatchRuns,
      .dry_run = f.dry_run};
  PruneResult total;
  while (true) {
    absl::StatusOr<PruneResult> got = store.PruneRuns(request);
    if (!got.ok()) {
      // Batches before this one are committed: say what they deleted.
      return Failure(absl::StrCat("prune: ", got.status().message(), " (", total.runs,
                                  " runs deleted before the failure; run it again to go on)"));
    }
    total.runs += got->runs;
    total.rows += got->rows;
    if (f.dry_run || got->runs < request.limit) break;
  }
  const std::string before =
      absl::FormatTime(absl::RFC3339_sec, request.finished_before, absl::UTCTimeZone());
  if (f.json) {
    std::cout << nlohmann::json{{"dry_run", f.dry_run},
                                {"runs", total.runs},
                                {"rows", total.rows},
                                {"finished_before", before},
                                {"workflow", f.workflow}}
                     .dump()
              << "\n";
    return 0;
  }
  std::cout << "prune: " << (f.dry_run ? "would delete " : "deleted ") << total.runs
            << " finished runs (" << total.rows << " rows) that finished before " << before
            << (f.workflow.empty() ? "" : absl::StrCat(" of workflow ", f.workflow)) << "\n";
  return 0;
}

}  // namespace runloom::cli
