// Lease holders another process can prove dead (issue 27, restart
// recovery): the engine's default owner name carries the holding process's
// identity on its host, so that a process on the same host (a restarted
// worker, or any live one) can tell that the holder is gone and take its
// leases at once instead of waiting for them to expire.
//
// The rule (docs/operations.md "Restart recovery"): a holder is provably
// dead when it ran on this host (the same host name), in the same boot of
// the kernel (boot id: a reboot is another machine for this purpose), in
// the same pid namespace (a container sees its own pids), and its pid is
// gone or now names a process that started at another time (pid reuse).
// Anything else is unknown and left to the lease's expiry, as before: a
// holder on another host, an owner name that carries no identity (an
// embedder's own EngineOptions::owner), a /proc this process cannot read.
// Fencing is unchanged: whoever takes the lease next gets a new token.
//
// Thread-safety: pure functions, except SelfHolder() and ProcFs reads of
// the live system.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace runloom::engine_internal {

struct LeaseHolder {
  std::string host;      // gethostname(2)
  std::string boot_id;   // /proc/sys/kernel/random/boot_id
  uint64_t pid_ns = 0;   // the inode of /proc/self/ns/pid
  int64_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/<pid>/stat field 22 (clock ticks since boot)
  bool operator==(const LeaseHolder&) const = default;
};

// Reads a small file of /proc (nullopt: absent or unreadable). Tests give
// their own; LiveProcFs() reads the real one.
struct ProcFs {
  std::function<std::optional<std::string>(const std::string& path)> read;
  // readlink(2); nullopt when it fails.
  std::function<std::optional<std::string>(const std::string& path)> read_link;
};
const ProcFs& LiveProcFs();

// This process as a holder; nullopt when /proc does not say (then the
// engine's owner name carries no identity and its leases wait for expiry).
std::optional<LeaseHolder> SelfHolder(const ProcFs& proc = LiveProcFs());

// "<host>:<pid>~<boot id>~<pid ns>~<start ticks>": the default owner name
// (the part before the engine's "/<random>" suffix). Human-readable first.
std::string OwnerName(const LeaseHolder& holder);
// The holder an owner name (as stored in a lease, suffix and all) names;
// nullopt for any other name.
std::optional<LeaseHolder> ParseOwnerName(std::string_view owner);

// The start time of `pid` (field 22 of /proc/<pid>/stat); nullopt when
// there is no such process, it is a zombie (dead, not yet reaped), or its
// stat cannot be read or parsed.
std::optional<uint64_t> StartTicksOf(int64_t pid, const ProcFs& proc);

enum class HolderState { kAlive, kDead, kUnknown };
// Whether `holder` is provably dead, seen from `self` (rule above).
HolderState CheckHolder(const LeaseHolder& holder, const LeaseHolder& self, const ProcFs& proc);

}  // namespace runloom::engine_internal
