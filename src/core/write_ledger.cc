// Names of write states and the derived Idempotency-Key (runloom/write_ledger.h).
#include "runloom/write_ledger.h"

#include "core/digest.h"

#include "absl/strings/str_cat.h"

#include <string>

namespace runloom {

std::string_view ToString(WriteState s) {
  switch (s) {
    case WriteState::kIntent:
      return "intent";
    case WriteState::kDone:
      return "done";
  }
  return "unknown";
}

std::optional<WriteState> ParseWriteState(std::string_view s) {
  if (s == "intent") return WriteState::kIntent;
  if (s == "done") return WriteState::kDone;
  return std::nullopt;
}

std::string DeriveIdempotencyKey(const WriteKey& key) {
  // A unit separator (0x1f) cannot occur in run ids, step paths or action
  // names (all validated printable), so distinct keys hash distinct input.
  constexpr size_t kHexDigits = 32;
  std::string material = key.run_id;
  material += '\x1f';
  material += key.step_path;
  material += '\x1f';
  material += key.action;
  if (!key.decision.empty()) {
    material += '\x1f';
    material += key.decision;
  }
  return "rl-" + Sha256Hex(material).substr(0, kHexDigits);
}

std::string WriteDecision(const std::string& gate_path, int64_t revision,
                          const std::string& proposal_digest) {
  if (revision > 0) return absl::StrCat(gate_path, "@", revision, ":", proposal_digest);
  return absl::StrCat(gate_path, ":", proposal_digest);
}

}  // namespace runloom
