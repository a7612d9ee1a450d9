// libFuzzer target: the bounded JSON parser and run-input freezing (issue 8).
//
// The bytes are parsed with ParseJsonBounded (default LoadLimits); the result,
// when it is an object, is frozen against a small fixed workflow with object,
// array, integer and string inputs. The bytes are also passed as the string
// {"o": <text>}, so FreezeInputs' string -> JSON conversion (what
// `--input k=<json>` goes through) reads them too. Nothing may crash, hang or
// allocate without bound; refusals are Status values.
// Built only with -DRUNLOOM_FUZZ=ON under clang; `make test-fuzz` runs it.
#include "runloom/workflow.h"

#include "core/bounded_json.h"
#include "core/check.h"
#include "workflow/inputs.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace {

constexpr char kWorkflow[] = R"(name: fuzz_inputs
inputs:
  o: {type: object}
  a: {type: array}
  n: {type: integer, default: 3}
  s: {type: string, enum: [x, y]}
steps:
  - id: t
    kind: noop
)";

runloom::Workflow LoadFixedWorkflow() {
  absl::StatusOr<runloom::Workflow> loaded = runloom::LoadWorkflowYaml(kWorkflow, "fuzz.yaml");
  RUNLOOM_CHECK(loaded.ok()) << loaded.status().ToString();
  return *std::move(loaded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const runloom::Workflow wf = LoadFixedWorkflow();
  absl::StatusOr<nlohmann::json> parsed = runloom::ParseJsonBounded(text, "fuzz input");
  if (parsed.ok() && parsed->is_object()) {
    (void)runloom::FreezeInputs(wf, *parsed);
  }
  (void)runloom::FreezeInputs(wf, nlohmann::json{{"o", text}});
  (void)runloom::FreezeInputs(wf, nlohmann::json{{"a", text}});
  return 0;
}
