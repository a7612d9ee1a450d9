// CpuLoad: how busy this machine's CPUs are, for the concurrency controller's
// CPU limiter. The real one reads /proc/stat; a test gives its own.
//
// Thread-safety: Busy() is called from the controller's tick thread only.
#pragma once

#include <memory>
#include <optional>

namespace runloom {

class CpuLoad {
 public:
  virtual ~CpuLoad() = default;
  // The fraction of CPU time spent busy (0..1) since the previous call;
  // nullopt on the first call or when it cannot be read.
  virtual std::optional<double> Busy() = 0;
};

// Reads the aggregate "cpu" line of /proc/stat (Linux); elsewhere every call
// returns nullopt, which leaves the CPU limiter out.
std::unique_ptr<CpuLoad> NewProcStatCpuLoad();

}  // namespace runloom
