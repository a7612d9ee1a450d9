#include "runloom/transport.h"

#include "core/status_macros.h"

#include <vector>

namespace runloom {

absl::StatusOr<int> Transport::RedriveAll() {
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<DeadLetter> all, ListDeadLetters(0));
  int done = 0;
  for (const DeadLetter& d : all) {
    absl::Status s = Redrive(d.id);
    if (s.code() == absl::StatusCode::kNotFound) continue;  // redriven meanwhile
    RUNLOOM_RETURN_IF_ERROR(s);
    ++done;
  }
  return done;
}

}  // namespace runloom
