#include "core/crash_point.h"

#include "runloom/mutex.h"

#include "absl/strings/numbers.h"

#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unistd.h>

namespace runloom {
namespace {

constexpr std::array kAll = {CrashPoint::kBeforeStoreCommit, CrashPoint::kAfterStoreCommit,
                             CrashPoint::kAfterStepCommit};

// RUNLOOM_CRASH_AT, parsed once. `hit` counts from 1.
struct CrashTarget {
  std::optional<CrashPoint> point;
  int hit = 1;
};

CrashTarget ReadCrashTarget() {
  const char* env = std::getenv("RUNLOOM_CRASH_AT");
  if (env == nullptr || *env == '\0') return {};
  std::string_view text(env);
  CrashTarget t;
  const size_t colon = text.find(':');
  if (colon != std::string_view::npos) {
    if (!absl::SimpleAtoi(std::string(text.substr(colon + 1)), &t.hit) || t.hit < 1) {
      std::fprintf(stderr, "runloom: ignoring RUNLOOM_CRASH_AT=%s: bad hit count\n", env);
      return {};
    }
    text = text.substr(0, colon);
  }
  t.point = ParseCrashPoint(text);
  if (!t.point) std::fprintf(stderr, "runloom: ignoring RUNLOOM_CRASH_AT=%s: no such point\n", env);
  return t;
}

std::atomic<int> hits[kAll.size()];

Mutex sync_mu;
// Shared so that a callback still running on another thread outlives its
// replacement.
std::shared_ptr<const SyncPointCallback> sync_callback ABSL_GUARDED_BY(sync_mu);

}  // namespace

std::string_view ToString(CrashPoint p) {
  switch (p) {
    case CrashPoint::kBeforeStoreCommit:
      return "before_store_commit";
    case CrashPoint::kAfterStoreCommit:
      return "after_store_commit";
    case CrashPoint::kAfterStepCommit:
      return "after_step_commit";
  }
  return "unknown";
}

std::optional<CrashPoint> ParseCrashPoint(std::string_view name) {
  for (CrashPoint p : kAll) {
    if (ToString(p) == name) return p;
  }
  return std::nullopt;
}

std::span<const CrashPoint> AllCrashPoints() { return kAll; }

void SetSyncPointCallback(SyncPointCallback cb) {
  auto next = cb ? std::make_shared<const SyncPointCallback>(std::move(cb)) : nullptr;
  MutexLock l(&sync_mu);
  sync_callback = std::move(next);
}

namespace core_internal {

void MaybeCrashAt(CrashPoint p) {
  static const CrashTarget target = ReadCrashTarget();
  if (target.point != p) return;
  const int n = ++hits[static_cast<size_t>(p)];
  if (n != target.hit) return;
  // One write(2), no stdio buffering: the line is out before the kill.
  const std::string line = "runloom: crash point " + std::string(ToString(p)) + " hit " +
                           std::to_string(n) + ": killing the process\n";
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, line.data(), line.size());
  std::raise(SIGKILL);
  _exit(137);  // not reached
}

void ProcessSyncPoint(std::string_view name) {
  std::shared_ptr<const SyncPointCallback> cb;
  {
    MutexLock l(&sync_mu);
    cb = sync_callback;
  }
  if (cb != nullptr) (*cb)(name);
}

}  // namespace core_internal
}  // namespace runloom
