#include "llm/conversation.h"

#include "absl/strings/str_cat.h"

#include <string>

namespace runloom {
namespace {

absl::Status Bad(const char* key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("llm step: ", key, " ", what));
}

// j[key] as a string; "" when absent.
absl::StatusOr<std::string> Text(const char* where, const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return std::string();
  if (!j[key].is_string()) return Bad(where, absl::StrCat("has a ", key, " that is not text"));
  return j[key].get<std::string>();
}

}  // namespace

nlohmann::json AgentToolsToJson(const std::vector<LlmTool>& tools) {
  nlohmann::json out = nlohmann::json::array();
  for (const LlmTool& t : tools) {
    out.push_back({{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}});
  }
  return out;
}

absl::StatusOr<std::vector<LlmTool>> AgentToolsFromJson(const nlohmann::json& j) {
  if (!j.is_array()) return Bad(kAgentToolsKey, "is not a list");
  std::vector<LlmTool> out;
  for (const nlohmann::json& t : j) {
    if (!t.is_object()) return Bad(kAgentToolsKey, "has an entry that is not an object");
    LlmTool tool;
    absl::StatusOr<std::string> name = Text(kAgentToolsKey, t, "name");
    if (!name.ok()) return name.status();
    absl::StatusOr<std::string> description = Text(kAgentToolsKey, t, "description");
    if (!description.ok()) return description.status();
    tool.name = *std::move(name);
    tool.description = *std::move(description);
    tool.parameters = t.value("parameters", nlohmann::json::object());
    out.push_back(std::move(tool));
  }
  return out;
}

nlohmann::json AgentHistoryToJson(const std::vector<LlmMessage>& history) {
  nlohmann::json out = nlohmann::json::array();
  for (const LlmMessage& m : history) {
    nlohmann::json msg = {{"role", m.role}, {"text", m.text}};
    if (m.role == "tool") {
      msg["tool_call_id"] = m.tool_call_id;
      msg["tool_name"] = m.tool_name;
      msg["is_error"] = m.is_error;
    } else {
      nlohmann::json calls = nlohmann::json::array();
      for (const LlmToolCall& c : m.tool_calls) {
        calls.push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
      }
      msg["tool_calls"] = std::move(calls);
    }
    out.push_back(std::move(msg));
  }
  return out;
}

absl::StatusOr<std::vector<LlmMessage>> AgentHistoryFromJson(const nlohmann::json& j) {
  if (!j.is_array()) return Bad(kAgentHistoryKey, "is not a list");
  std::vector<LlmMessage> out;
  for (const nlohmann::json& e : j) {
    if (!e.is_object()) return Bad(kAgentHistoryKey, "has an entry that is not an object");
    LlmMessage m;
    absl::StatusOr<std::string> role = Text(kAgentHistoryKey, e, "role");
    if (!role.ok()) return role.status();
    if (*role != "assistant" && *role != "tool") {
      return Bad(kAgentHistoryKey, absl::StrCat("has role '", *role, "'; use assistant or tool"));
    }
    m.role = *std::move(role);
    absl::StatusOr<std::string> text = Text(kAgentHistoryKey, e, "text");
    if (!text.ok()) return text.status();
    m.text = *std::move(text);
    if (m.role == "tool") {
      absl::StatusOr<std::string> id = Text(kAgentHistoryKey, e, "tool_call_id");
      if (!id.ok()) return id.status();
      absl::StatusOr<std::string> name = Text(kAgentHistoryKey, e, "tool_name");
      if (!name.ok()) return name.status();
      m.tool_call_id = *std::move(id);
      m.tool_name = *std::move(name);
      m.is_error = e.value("is_error", false);
    } else if (e.contains("tool_calls") && e["tool_calls"].is_array()) {
      for (const nlohmann::json& c : e["tool_calls"]) {
        if (!c.is_object()) return Bad(kAgentHistoryKey, "has a tool call that is not an object");
        LlmToolCall call;
        absl::StatusOr<std::string> id = Text(kAgentHistoryKey, c, "id");
        if (!id.ok()) return id.status();
        absl::StatusOr<std::string> name = Text(kAgentHistoryKey, c, "name");
        if (!name.ok()) return name.status();
        absl::StatusOr<std::string> args = Text(kAgentHistoryKey, c, "arguments");
        if (!args.ok()) return args.status();
        call.id = *std::move(id);
        call.name = *std::move(name);
        call.arguments = *std::move(args);
        m.tool_calls.push_back(std::move(call));
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace runloom
