// Reading a step's kind-specific config (StepDef::config) with useful errors.
//
// The same parser serves Validate (templates unresolved: a "{{ ... }}" string
// stands for a value of unknown type and is accepted unchecked) and Execute
// (templates resolved: every value must have its final type).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace runloom::steps_internal {

// True for a string holding a template ("{{ ... }}").
bool IsTemplate(const nlohmann::json& value);

class ConfigReader {
 public:
  // `kind` names the step kind in messages. `config` must outlive the reader.
  // `unresolved`: templates are not resolved yet (Validate).
  ConfigReader(std::string kind, const nlohmann::json& config, bool unresolved);

  // kInvalidArgument unless config is an object (or null: treated as {}) whose
  // keys are all in `allowed`; the message lists the allowed keys.
  absl::Status CheckKeys(std::initializer_list<std::string_view> allowed) const;

  bool Has(const std::string& key) const;
  // The raw value; null when absent.
  const nlohmann::json& Get(const std::string& key) const;
  // True when the value must wait for template resolution (Validate only).
  bool Deferred(const std::string& key) const;

  // Typed getters: nullopt when absent or Deferred. kInvalidArgument on a
  // wrong type, naming the key and what is expected.
  absl::StatusOr<std::optional<std::string>> String(const std::string& key) const;
  // A literal true or false (a template is refused: the value decides what
  // validation allows).
  absl::StatusOr<std::optional<bool>> Bool(const std::string& key) const;
  // An integer in [min, max]; a string of digits (a resolved template) is accepted.
  absl::StatusOr<std::optional<int64_t>> Int(const std::string& key, int64_t min,
                                             int64_t max) const;
  // A duration string, e.g. "250ms", "2s", "1m30s".
  absl::StatusOr<std::optional<absl::Duration>> Duration(const std::string& key) const;
  // An ISO 8601 time with its offset, e.g. "2026-12-24T18:00:00Z".
  absl::StatusOr<std::optional<absl::Time>> Timestamp(const std::string& key) const;

  // kInvalidArgument "<kind> step: key '<key>' <what>".
  absl::Status Error(const std::string& key, std::string_view what) const;
  // Error for a required key that is missing.
  absl::Status Missing(const std::string& key, std::string_view example) const;

  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  const nlohmann::json& config_;
  bool unresolved_;
};

}  // namespace runloom::steps_internal
