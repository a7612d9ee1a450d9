#include "engine/service/lease_holder.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <algorithm>
#include <fstream>
#include <limits.h>
#include <unistd.h>
#include <vector>

namespace runloom::engine_internal {
namespace {

// /proc files read here are a line or two; anything longer is not one.
constexpr size_t kMaxProcFileBytes = 4096;

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string out(kMaxProcFileBytes, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  if (out.empty() && !in.eof()) return std::nullopt;
  return out;
}

std::optional<std::string> ReadLink(const std::string& path) {
  char buf[PATH_MAX];
  const ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

// "pid:[4026531836]" -> 4026531836.
std::optional<uint64_t> NamespaceInode(std::string_view link) {
  const size_t open = link.find('[');
  const size_t close = link.rfind(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close <= open + 1) {
    return std::nullopt;
  }
  uint64_t inode = 0;
  if (!absl::SimpleAtoi(absl::string_view(link.data() + open + 1, close - open - 1), &inode)) {
    return std::nullopt;
  }
  return inode;
}

// A host name or boot id that fits between the owner name's separators.
bool Plain(std::string_view s) {
  if (s.empty() || s.size() > 255) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') {
      return false;
    }
  }
  return true;
}

}  // namespace

const ProcFs& LiveProcFs() {
  static const ProcFs* live = new ProcFs{.read = ReadSmallFile, .read_link = ReadLink};
  return *live;
}

std::optional<uint64_t> StartTicksOf(int64_t pid, const ProcFs& proc) {
  if (pid <= 0) return std::nullopt;
  std::optional<std::string> stat = proc.read(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.has_value()) return std::nullopt;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // the fields start after the last ')'. starttime is field 22 of the
  // line, the 20th after comm (state is the first).
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(*stat).substr(close + 1), ' ', absl::SkipEmpty());
  constexpr size_t kStartTimeAfterComm = 19;  // 0-based: state is 0
  if (fields.size() <= kStartTimeAfterComm) return std::nullopt;
  // A zombie (killed, not yet reaped by its parent) holds nothing any more.
  if (fields[0] == "Z" || fields[0] == "X") return std::nullopt;
  uint64_t ticks = 0;
  if (!absl::SimpleAtoi(fields[kStartTimeAfterComm], &ticks)) return std::nullopt;
  return ticks;
}

std::optional<LeaseHolder> SelfHolder(const ProcFs& proc) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || !Plain(host)) return std::nullopt;
  std::optional<std::string> boot = proc.read("/proc/sys/kernel/random/boot_id");
  if (!boot.has_value()) return std::nullopt;
  const std::string boot_id(absl::StripAsciiWhitespace(*boot));
  if (!Plain(boot_id)) return std::nullopt;
  std::optional<std::string> ns = proc.read_link("/proc/self/ns/pid");
  std::optional<uint64_t> inode = ns ? NamespaceInode(*ns) : std::nullopt;
  if (!inode.has_value()) return std::nullopt;
  const int64_t pid = getpid();
  std::optional<uint64_t> ticks = StartTicksOf(pid, proc);
  if (!ticks.has_value()) return std::nullopt;
  return LeaseHolder{
      .host = host, .boot_id = boot_id, .pid_ns = *inode, .pid = pid, .start_ticks = *ticks};
}

std::string OwnerName(const LeaseHolder& h) {
  return absl::StrCat(h.host, ":", h.pid, "~", h.boot_id, "~", h.pid_ns, "~", h.start_ticks);
}

std::optional<LeaseHolder> ParseOwnerName(std::string_view owner) {
  if (owner.size() > 1024) return std::nullopt;
  // The engine appends "/<random>" to its owner name for each lease holder
  // it runs (Engine::Impl); the identity is before it.
  const absl::string_view name = absl::string_view(owner.data(), owner.size()).substr(
      0, std::min(owner.size(), owner.find('/')));
  std::vector<absl::string_view> parts = absl::StrSplit(name, '~');
  if (parts.size() != 4) return std::nullopt;
  const size_t colon = parts[0].rfind(':');
  if (colon == absl::string_view::npos) return std::nullopt;
  LeaseHolder h;
  h.host = std::string(parts[0].substr(0, colon));
  h.boot_id = std::string(parts[1]);
  if (!Plain(h.host) || !Plain(h.boot_id) || !absl::SimpleAtoi(parts[0].substr(colon + 1), &h.pid) ||
      h.pid <= 0 || !absl::SimpleAtoi(parts[2], &h.pid_ns) ||
      !absl::SimpleAtoi(parts[3], &h.start_ticks)) {
    return std::nullopt;
  }
  return h;
}

HolderState CheckHolder(const LeaseHolder& holder, const LeaseHolder& self, const ProcFs& proc) {
  if (holder.host != self.host || holder.boot_id != self.boot_id || holder.pid_ns != self.pid_ns) {
    return HolderState::kUnknown;  // another machine, boot or container: only expiry tells
  }
  if (holder.pid == self.pid) {
    // This process's own pid: it is this process (alive) unless the start
    // times differ, which means an earlier process that had our pid.
    return holder.start_ticks == self.start_ticks ? HolderState::kAlive : HolderState::kDead;
  }
  std::optional<uint64_t> ticks = StartTicksOf(holder.pid, proc);
  if (!ticks.has_value()) {
    // No /proc/<pid>/stat: gone, if /proc itself answers for this process.
    return StartTicksOf(self.pid, proc).has_value() ? HolderState::kDead : HolderState::kUnknown;
  }
  return *ticks == holder.start_ticks ? HolderState::kAlive : HolderState::kDead;
}

}  // namespace runloom::engine_internal
