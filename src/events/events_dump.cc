// events_dump: prints SampleEvents() as JSON lines (one envelope per line) on
// stdout. tests/events/ validates its output against schemas/events/.
#include "runloom/events.h"

#include "events/samples.h"

#include <iostream>

int main() {
  for (const runloom::Event& e : runloom::SampleEvents()) {
    std::cout << runloom::EventToJson(e).dump() << "\n";
  }
  std::cout.flush();
  return std::cout.good() ? 0 : 1;
}
