// An agent's conversation as the llm step kind receives it (issue 24).
//
// An agent step (engine/run/agent_step.cc) runs each model turn as an llm
// step whose config carries two internal keys, added after templates are
// resolved (so the model's own words are never read as templates): the
// tools the model may call and the conversation so far. A workflow file
// cannot write these keys: the llm kind's Validate refuses them.
//
// Thread-safety: pure functions.
#pragma once

#include "llm/provider.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <vector>

namespace runloom {

inline constexpr char kAgentToolsKey[] = "agent_tools";
inline constexpr char kAgentHistoryKey[] = "agent_history";

nlohmann::json AgentToolsToJson(const std::vector<LlmTool>& tools);
absl::StatusOr<std::vector<LlmTool>> AgentToolsFromJson(const nlohmann::json& j);

nlohmann::json AgentHistoryToJson(const std::vector<LlmMessage>& history);
absl::StatusOr<std::vector<LlmMessage>> AgentHistoryFromJson(const nlohmann::json& j);

}  // namespace runloom
