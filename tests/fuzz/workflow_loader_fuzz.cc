// libFuzzer target: the workflow loader on untrusted YAML (issue 8).
//
// Any text must load or be refused with a Status, after bounded work and
// memory (LoadLimits defaults). A workflow that loads must survive the
// catalog's round trip: CanonicalWorkflow -> WorkflowDigest ->
// WorkflowFromCanonical, whose result has the same canonical form.
// Built only with -DRUNLOOM_FUZZ=ON under clang; `make test-fuzz` runs it.
#include "runloom/workflow.h"

#include "core/check.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<runloom::Workflow> wf = runloom::LoadWorkflowYaml(text, "fuzz.yaml");
  if (!wf.ok()) {
    return 0;
  }
  const nlohmann::json canonical = runloom::CanonicalWorkflow(*wf);
  const std::string digest = runloom::WorkflowDigest(*wf);
  absl::StatusOr<runloom::Workflow> again = runloom::WorkflowFromCanonical(canonical);
  RUNLOOM_CHECK(again.ok()) << "canonical form of a loaded workflow does not load back: "
                            << again.status().ToString();
  RUNLOOM_CHECK(runloom::WorkflowDigest(*again) == digest)
      << "digest changed across the canonical round trip";
  return 0;
}
