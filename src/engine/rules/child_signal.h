// The signal a child run's end sends its parent (issue 23, `kind: run`):
// "_child.<child run id>". Its name starts with "_", which no signal a user
// may send or wait for does (the signal name rules refuse it), so only the
// engine sends it and only a run step waits for it. Written and read here
// only: the run step (engine/run/child_run), the wire form's waiting_for,
// `runloom run` (which drives the child) and the simulator's checker.
//
// Thread-safety: stateless.
#pragma once

#include <string>
#include <string_view>

namespace runloom::engine_internal {

// The end signal of child `child_run_id`.
std::string ChildSignalName(std::string_view child_run_id);

// The child run whose end `signal_name` is; "" when it is no child's end.
std::string ChildOfSignal(std::string_view signal_name);

}  // namespace runloom::engine_internal
