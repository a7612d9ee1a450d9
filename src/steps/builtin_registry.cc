// StepRegistry::WithBuiltins (runloom/step.h): the local kinds and http, in
// runloom::steps_http (libcurl), so runloom::steps links no network library.
#include "runloom/step.h"

#include "steps/builtin_steps.h"

namespace runloom {

std::unique_ptr<StepRegistry> StepRegistry::WithBuiltins() {
  std::unique_ptr<StepRegistry> registry = WithLocalBuiltins();
  registry->Register("http", NewHttpStep());
  return registry;
}

}  // namespace runloom
