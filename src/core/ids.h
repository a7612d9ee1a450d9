// Identifiers: run ids and lease tokens.
#pragma once

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"

#include <string>

namespace runloom {

// A run id: "r_" + 12 chars of time-ordered base32 + 10 random chars, so ids
// sort roughly by creation time and never collide across processes.
std::string NewRunId(absl::Time now, absl::BitGenRef gen);

// An opaque 128-bit random token, hex.
std::string NewToken(absl::BitGenRef gen);

}  // namespace runloom
