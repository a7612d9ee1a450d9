// JsonSchema: a JSON Schema (draft 7 and earlier keywords, as valijson
// implements them) compiled once, checked against model replies.
//
// An llm step's `response_schema:` is compiled when the workflow is
// validated, so a malformed schema is refused at load time; a reply that
// does not match is kInvalidArgument listing where it differs (the error
// class `invalid`). Remote `$ref`s are refused: nothing is fetched.
//
// Thread-safety: a compiled JsonSchema is immutable; Validate may be called
// from many threads at once.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <memory>

namespace runloom {

class JsonSchema {
 public:
  ~JsonSchema();
  JsonSchema(const JsonSchema&) = delete;
  JsonSchema& operator=(const JsonSchema&) = delete;

  // kInvalidArgument "<field> ..." when `schema` is not a schema valijson
  // accepts (not an object, a keyword of the wrong type, a remote $ref).
  // `field` names where the schema was written and `subject` what is checked
  // against it, in messages (static strings).
  static absl::StatusOr<std::unique_ptr<JsonSchema>> Compile(const nlohmann::json& schema,
                                                             const char* field = "response_schema",
                                                             const char* subject = "reply");

  // OK when `value` matches; kInvalidArgument "<subject> does not match
  // <field>: at /items/0/score: ..." naming up to a few mismatches.
  absl::Status Validate(const nlohmann::json& value) const;

 private:
  struct Impl;
  explicit JsonSchema(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace runloom
