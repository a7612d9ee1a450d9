// SHA-256 digests and the canonical JSON form they are taken over.
#pragma once

#include "nlohmann/json.hpp"

#include <string>
#include <string_view>

namespace runloom {

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// Canonical JSON text: object keys sorted (nlohmann::json keeps std::map
// order), no whitespace, UTF-8 kept as is. Equal values give equal text.
std::string CanonicalJson(const nlohmann::json& value);

// "sha256:<hex>" over CanonicalJson(value).
std::string JsonDigest(const nlohmann::json& value);

}  // namespace runloom
