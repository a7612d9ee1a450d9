// Named crash points and sync points (STYLE.md §3), compiled only with
// RUNLOOM_TESTING.
//
// A crash point marks a place where a chaos test may kill the process to show
// that recovery works from exactly there:
//   RUNLOOM_CRASH_POINT(CrashPoint::kAfterStoreCommit);
// Without RUNLOOM_TESTING it compiles to nothing. With it, when the
// environment variable RUNLOOM_CRASH_AT names the point, e.g.
//   RUNLOOM_CRASH_AT=after_store_commit     (its first hit in this process)
//   RUNLOOM_CRASH_AT=after_store_commit:3   (its third hit)
// the process prints "runloom: crash point <name> hit <n>: killing the
// process" to stderr and sends itself SIGKILL: no destructor, no atexit
// handler and no buffered output runs, as in a real crash (the operating
// system keeps what was already written to files).
//
// A sync point marks a place where a test may run code of its own, e.g. to
// force an interleaving of two threads:
//   RUNLOOM_SYNC_POINT("queue.claim.after_select");
// Without RUNLOOM_TESTING it compiles to nothing; with it, it calls the
// callback installed by SetSyncPointCallback (if any) with the point's name.
//
// Every crash point is one enumerator of CrashPoint, so chaos tests can loop
// over AllCrashPoints(). To add one: an enumerator, its name in
// src/core/crash_point.cc, and a RUNLOOM_CRASH_POINT at the place.
//
// Thread-safety: everything here is thread-safe. SetSyncPointCallback must not
// race with the code it observes (install it before starting that code).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string_view>

namespace runloom {

enum class CrashPoint {
  // In the SQLite write path, with every op of a group written and the
  // COMMIT not yet run: dying here must lose the whole group.
  kBeforeStoreCommit,
  // In the SQLite write path, right after a COMMIT succeeded and before any
  // writer is told: dying here must lose nothing of the group.
  kAfterStoreCommit,
  // In the engine, right after a write that carried finished steps' records
  // committed: dying here must not run those steps again.
  kAfterStepCommit,
};

// "before_store_commit", "after_store_commit", "after_step_commit".
std::string_view ToString(CrashPoint p);
std::optional<CrashPoint> ParseCrashPoint(std::string_view name);
std::span<const CrashPoint> AllCrashPoints();

// Called with each sync point's name, on the thread that reaches it.
using SyncPointCallback = std::function<void(std::string_view name)>;
// Installs `cb` (an empty function removes it). Only meaningful with
// RUNLOOM_TESTING; a no-op build never calls it.
void SetSyncPointCallback(SyncPointCallback cb);

namespace core_internal {
// Kills the process if RUNLOOM_CRASH_AT selects this hit of `p`.
void MaybeCrashAt(CrashPoint p);
void ProcessSyncPoint(std::string_view name);
}  // namespace core_internal

}  // namespace runloom

#ifdef RUNLOOM_TESTING
#define RUNLOOM_CRASH_POINT(point) ::runloom::core_internal::MaybeCrashAt(point)
#define RUNLOOM_SYNC_POINT(name) ::runloom::core_internal::ProcessSyncPoint(name)
#else
#define RUNLOOM_CRASH_POINT(point) static_cast<void>(0)
#define RUNLOOM_SYNC_POINT(name) static_cast<void>(0)
#endif
