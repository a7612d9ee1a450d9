// Names shared by the loader, the validator and the canonical form: trigger
// rules, error classes, input types, and the syntax of ids.
#pragma once

#include "runloom/workflow.h"

#include "nlohmann/json.hpp"

#include <optional>
#include <string>
#include <vector>

namespace runloom::workflow_internal {

// The step kinds the loader, the validator and the canonical form treat as
// containers of other steps.
inline constexpr char kLoop[] = "loop";
inline constexpr char kParallel[] = "parallel";
// A tool-calling agent (issue 24): its `tools:` hold steps of their own.
inline constexpr char kAgent[] = "agent";
// A wait for a signal (issue 23): its `timeout:` is how long it waits, not a
// bound on work, so `defaults.timeout` does not apply to it.
inline constexpr char kWait[] = "wait";

std::optional<TriggerRule> ParseTriggerRule(const std::string& s);
std::optional<ErrorClass> ParseErrorClass(const std::string& s);

// "all_success, all_done, ..." for messages.
std::string TriggerRuleNames();
std::string ErrorClassNames();

// string, integer, number, boolean, object, array.
const std::vector<std::string>& InputTypes();
bool IsInputType(const std::string& type);
// True when `v` is a value of input type `type` (an integer is also a number).
bool MatchesInputType(const std::string& type, const nlohmann::json& v);

bool IsWorkflowName(const std::string& s);  // [a-z][a-z0-9_-]*
bool IsStepId(const std::string& s);        // [a-z][a-z0-9_]*
bool IsInputName(const std::string& s);     // [A-Za-z_][A-Za-z0-9_]*
bool IsBranchName(const std::string& s);    // [a-z0-9_]+

// The name a branch is known by: its own, or "b<index>" when it has none.
std::string BranchName(const Branch& b, size_t index);

// Compact JSON text for messages; invalid UTF-8 is replaced, never thrown on.
std::string DumpJson(const nlohmann::json& v);

// approved, completed, rejected, unresolved, failed.
bool IsOutcomeWord(const std::string& s);

}  // namespace runloom::workflow_internal
