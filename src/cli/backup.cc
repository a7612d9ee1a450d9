// BackupCommand (commands.h): `runloom backup --to FILE` (issue 25).
#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/str_cat.h"

#include <iostream>

namespace runloom::cli {

int BackupCommand(const CommonFlags& c, const std::string& to) {
  absl::StatusOr<Backend> backend = OpenExistingDb(c);
  if (!backend.ok()) return DbOpenFailure(c, backend.status());
  if (!backend->backup) {
    return BadInput(
        "backup: this database is PostgreSQL, which runloom does not copy: back it up with "
        "pg_dump, or with a base backup and WAL archiving for point-in-time recovery "
        "(docs/operations.md, \"Backups\")");
  }
  const absl::Status s = backend->backup(to);
  if (absl::IsAlreadyExists(s) || absl::IsInvalidArgument(s)) {
    return BadInput(std::string(s.message()));  // exit 2: the file named
  }
  if (!s.ok()) return ExitForError(s);
  std::cout << "backup: wrote " << to << "\n";
  return 0;
}

}  // namespace runloom::cli
