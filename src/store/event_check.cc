#include "store/event_check.h"

#include "runloom/events.h"
#include "runloom/run.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

#include <atomic>

namespace runloom::store_internal {
namespace {
std::atomic<bool> check_on_write{true};
}  // namespace

absl::Status CheckEventOnWrite(const std::string& run_id, const std::string& type,
                               int schema_version, const std::string& data_json) {
  if (!check_on_write.load(std::memory_order_relaxed)) return absl::OkStatus();
  Event e;
  e.run_id = run_id;
  e.type = type;
  e.schema_version = schema_version;
  e.data = nlohmann::json::parse(data_json, nullptr, /*allow_exceptions=*/false);
  absl::Status s = ValidateEvent(e);
  if (s.ok()) return s;
  return absl::InternalError(
      absl::StrCat("refusing to store an invalid event (a bug in its writer): ", s.message()));
}

void TEST_SetEventCheckOnWrite(bool on) { check_on_write.store(on, std::memory_order_relaxed); }

}  // namespace runloom::store_internal
