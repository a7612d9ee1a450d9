#include "llm/cpu_load.h"

#include <array>
#include <cstdint>
#include <fstream>
#include <string>

namespace runloom {
namespace {

class ProcStatCpuLoad final : public CpuLoad {
 public:
  std::optional<double> Busy() override {
    std::ifstream in("/proc/stat");
    std::string label;
    // user nice system idle iowait irq softirq steal
    std::array<uint64_t, 8> v{};
    if (!(in >> label) || label != "cpu") return std::nullopt;
    for (uint64_t& x : v) {
      if (!(in >> x)) return std::nullopt;
    }
    const uint64_t idle = v[3] + v[4];
    uint64_t total = 0;
    for (uint64_t x : v) total += x;
    std::optional<double> out;
    if (have_prev_ && total > prev_total_) {
      const double dt = static_cast<double>(total - prev_total_);
      const double di = static_cast<double>(idle >= prev_idle_ ? idle - prev_idle_ : 0);
      out = 1.0 - di / dt;
    }
    have_prev_ = true;
    prev_total_ = total;
    prev_idle_ = idle;
    return out;
  }

 private:
  // Owned by the caller's (single) tick thread.
  bool have_prev_ = false;
  uint64_t prev_total_ = 0;
  uint64_t prev_idle_ = 0;
};

}  // namespace

std::unique_ptr<CpuLoad> NewProcStatCpuLoad() { return std::make_unique<ProcStatCpuLoad>(); }

}  // namespace runloom
