// Lease holders (issue 27): the owner name's identity round-trips, and a
// holder is dead only when it is provably so (same host, boot and pid
// namespace; its pid gone, a zombie, or reused), over a fake /proc.
#include "engine/service/lease_holder.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <map>
#include <string>

namespace runloom::engine_internal {
namespace {

// A /proc of the given stat lines, by pid.
struct FakeProc {
  std::map<int64_t, std::string> stats;
  ProcFs fs() {
    return ProcFs{.read =
                      [this](const std::string& path) -> std::optional<std::string> {
                        for (const auto& [pid, line] : stats) {
                          if (path == absl::StrCat("/proc/", pid, "/stat")) return line;
                        }
                        return std::nullopt;
                      },
                  .read_link = [](const std::string&) -> std::optional<std::string> {
                    return std::nullopt;
                  }};
  }
};

// A stat line with `comm`, `state` and start time `ticks` (field 22).
std::string Stat(int64_t pid, const std::string& comm, char state, uint64_t ticks) {
  std::string line = absl::StrCat(pid, " (", comm, ") ", std::string(1, state));
  for (int field = 4; field <= 21; ++field) absl::StrAppend(&line, " ", field);
  absl::StrAppend(&line, " ", ticks, " 23 24\n");
  return line;
}

const LeaseHolder kSelf{.host = "node-1",
                        .boot_id = "6a1f1c9e-7a51-4a52-9d47-5f6a3c2b1e00",
                        .pid_ns = 4026531836,
                        .pid = 100,
                        .start_ticks = 5000};

TEST(LeaseHolder, TheOwnerNameRoundTripsWithTheEnginesSuffixAndRefusesOtherNames) {
  const LeaseHolder h{.host = "node-1", .boot_id = "b00t", .pid_ns = 7, .pid = 42, .start_ticks = 9};
  EXPECT_EQ(OwnerName(h), "node-1:42~b00t~7~9");
  EXPECT_EQ(ParseOwnerName(OwnerName(h)), h);
  EXPECT_EQ(ParseOwnerName(OwnerName(h) + "/00000000deadbeef"), h);
  for (const char* other : {"", "node-1:42", "worker-a", "node-1:42~b00t~7", "node-1:x~b00t~7~9",
                            "node 1:42~b00t~7~9", "node-1:-4~b00t~7~9", "node-1:42~b00t~7~9~1",
                            "node-1:42~b;00t~7~9"}) {
    EXPECT_EQ(ParseOwnerName(other), std::nullopt) << other;
  }
  EXPECT_EQ(ParseOwnerName(std::string(5000, 'a')), std::nullopt);
}

TEST(LeaseHolder, StartTicksComeFromField22AfterACommWithSpacesAndParentheses) {
  FakeProc proc;
  proc.stats[7] = Stat(7, "a) (b c", 'S', 123456);
  proc.stats[8] = Stat(8, "gone", 'Z', 99);
  proc.stats[9] = "9 (short) S 1 2\n";
  EXPECT_EQ(StartTicksOf(7, proc.fs()), 123456u);
  EXPECT_EQ(StartTicksOf(8, proc.fs()), std::nullopt) << "a zombie holds nothing";
  EXPECT_EQ(StartTicksOf(9, proc.fs()), std::nullopt);
  EXPECT_EQ(StartTicksOf(10, proc.fs()), std::nullopt);
  EXPECT_EQ(StartTicksOf(0, proc.fs()), std::nullopt);
}

TEST(LeaseHolder, OnlyAHolderOnThisHostBootAndNamespaceIsEverProvablyDead) {
  FakeProc proc;
  proc.stats[kSelf.pid] = Stat(kSelf.pid, "runloom", 'S', kSelf.start_ticks);
  proc.stats[200] = Stat(200, "runloom", 'S', 7000);
  proc.stats[300] = Stat(300, "bash", 'S', 8000);  // pid 300 reused by another process
  proc.stats[400] = Stat(400, "runloom", 'Z', 9000);
  auto holder = [](int64_t pid, uint64_t ticks) {
    LeaseHolder h = kSelf;
    h.pid = pid;
    h.start_ticks = ticks;
    return h;
  };
  EXPECT_EQ(CheckHolder(holder(200, 7000), kSelf, proc.fs()), HolderState::kAlive);
  EXPECT_EQ(CheckHolder(holder(300, 7500), kSelf, proc.fs()), HolderState::kDead);
  EXPECT_EQ(CheckHolder(holder(400, 9000), kSelf, proc.fs()), HolderState::kDead);
  EXPECT_EQ(CheckHolder(holder(500, 1), kSelf, proc.fs()), HolderState::kDead);
  EXPECT_EQ(CheckHolder(kSelf, kSelf, proc.fs()), HolderState::kAlive);
  EXPECT_EQ(CheckHolder(holder(kSelf.pid, 1), kSelf, proc.fs()), HolderState::kDead)
      << "an earlier process that had this pid";

  LeaseHolder elsewhere = holder(500, 1);
  elsewhere.host = "node-2";
  EXPECT_EQ(CheckHolder(elsewhere, kSelf, proc.fs()), HolderState::kUnknown);
  LeaseHolder before_reboot = holder(500, 1);
  before_reboot.boot_id = "another-boot";
  EXPECT_EQ(CheckHolder(before_reboot, kSelf, proc.fs()), HolderState::kUnknown);
  LeaseHolder container = holder(500, 1);
  container.pid_ns = 4026532000;
  EXPECT_EQ(CheckHolder(container, kSelf, proc.fs()), HolderState::kUnknown);

  FakeProc blind;  // a /proc that answers nothing, not even for us
  EXPECT_EQ(CheckHolder(holder(500, 1), kSelf, blind.fs()), HolderState::kUnknown);
}

TEST(LeaseHolder, ThisProcessHasAnIdentityOnLinux) {
  std::optional<LeaseHolder> self = SelfHolder();
  ASSERT_TRUE(self.has_value()) << "/proc is readable on the test machine";
  EXPECT_EQ(ParseOwnerName(OwnerName(*self)), *self);
  EXPECT_EQ(CheckHolder(*self, *self, LiveProcFs()), HolderState::kAlive);
}

}  // namespace
}  // namespace runloom::engine_internal
