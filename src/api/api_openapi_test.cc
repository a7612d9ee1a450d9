// docs/openapi.yaml and the server agree: every route the server has is a
// path and method there, and every path and method there is served.
#include "api/api.h"

#include "runloom/engine.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

#include <cstdlib>
#include <set>
#include <string>
#include <utility>

namespace runloom::api {
namespace {

std::string SourceDir() {
  const char* env = std::getenv("RUNLOOM_SOURCE_DIR");
  return env != nullptr ? env : RUNLOOM_SOURCE_DIR_DEFAULT;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TEST(OpenApi, EveryRouteIsDocumentedAndEveryDocumentedPathIsServed) {
  YAML::Node doc = YAML::LoadFile(SourceDir() + "/docs/openapi.yaml");
  ASSERT_EQ(doc["openapi"].as<std::string>().rfind("3.1", 0), 0u);
  std::set<std::pair<std::string, std::string>> documented;
  for (const auto& path : doc["paths"]) {
    for (const auto& op : path.second) {
      const std::string method = op.first.as<std::string>();
      if (method == "parameters" || method == "summary" || method == "description") continue;
      documented.insert({Lower(method), path.first.as<std::string>()});
      EXPECT_TRUE(op.second["responses"]) << method << " " << path.first.as<std::string>();
    }
  }
  std::set<std::pair<std::string, std::string>> served;
  Api api(nullptr, nullptr, nullptr);  // the table only; no handler runs
  for (const Route& r : api.routes()) served.insert({Lower(r.method), r.pattern});
  EXPECT_EQ(documented, served);
}

}  // namespace
}  // namespace runloom::api
