#include "core/ids.h"

#include "absl/random/distributions.h"
#include "absl/strings/str_format.h"

#include <cstdint>

namespace runloom {
namespace {
constexpr char kBase32[] = "0123456789abcdefghjkmnpqrstvwxyz";  // Crockford, lower case
constexpr int kTimeChars = 12;
constexpr int kRandomChars = 10;
}  // namespace

std::string NewRunId(absl::Time now, absl::BitGenRef gen) {
  uint64_t micros = static_cast<uint64_t>(absl::ToUnixMicros(now));
  std::string out = "r_";
  out.resize(2 + kTimeChars + kRandomChars);
  for (int i = kTimeChars - 1; i >= 0; --i) {
    out[2 + i] = kBase32[micros & 31];
    micros >>= 5;
  }
  for (int i = 0; i < kRandomChars; ++i) {
    out[2 + kTimeChars + i] = kBase32[absl::Uniform<int>(gen, 0, 32)];
  }
  return out;
}

std::string NewToken(absl::BitGenRef gen) {
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

}  // namespace runloom
