// runloom_web_vocabulary OUT: writes the web UI's vocabulary (web/*.js
// import it as ./vocabulary.js) from the C++ tables, at build time, so the UI
// cannot drift from the engine: the run statuses and which are terminal
// (runloom/status.h), the decisions (runloom/gate.h) and the event types
// (src/events). src/web/CMakeLists.txt runs it and embeds what it writes.
#include "runloom/events.h"
#include "runloom/gate.h"
#include "runloom/status.h"

#include "nlohmann/json.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

// `values` as a JavaScript array literal (JSON is valid JavaScript here: the
// values are plain lower-case words).
std::string ArrayLiteral(const std::vector<std::string>& values) {
  return nlohmann::json(values).dump();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: runloom_web_vocabulary OUT.js\n";
    return 2;
  }
  std::vector<std::string> statuses;
  std::vector<std::string> terminal;
  for (runloom::RunStatus s : runloom::kAllRunStatuses) {
    statuses.emplace_back(runloom::ToString(s));
    if (runloom::IsTerminal(s)) terminal.emplace_back(runloom::ToString(s));
  }
  std::vector<std::string> decisions(std::begin(runloom::kDecisions),
                                     std::end(runloom::kDecisions));
  const std::string text =
      "// Generated at build time by src/web/vocabulary_main.cc from the engine's tables\n"
      "// (runloom/status.h, runloom/gate.h, src/events). Do not edit.\n"
      "\n"
      "// Every run status, in the engine's order.\n"
      "export const STATUSES = " + ArrayLiteral(statuses) + ";\n"
      "// The statuses a run never leaves.\n"
      "export const TERMINAL = new Set(" + ArrayLiteral(terminal) + ");\n"
      "// What a reviewer may decide at a gate.\n"
      "export const DECISIONS = " + ArrayLiteral(decisions) + ";\n"
      "// Every event type.\n"
      "export const EVENT_TYPES = " + ArrayLiteral(runloom::AllEventTypes()) + ";\n";
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::perror(argv[1]);
    return 1;
  }
  return 0;
}
