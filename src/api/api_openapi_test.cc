// docs/openapi.yaml and the server agree: every route the server has is a
// path and method there, and every path and method there is served. The
// least role each route needs is the one its summary there names, and the
// one docs/operations.md's role table lists it under.
#include "api/api.h"

#include "runloom/auth.h"
#include "runloom/engine.h"
#include "testing/test_servers.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace runloom::api {
namespace {

using ::runloom::testing::SourceDir;

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

  // The role a summary names: "... (operator)", or "(no token needed)".
  for (const Route& r : api.routes()) {
    const YAML::Node op = doc["paths"][r.pattern][Lower(r.method)];
    if (!op) continue;  // reported above
    const std::string summary = op["summary"].as<std::string>("");
    const std::string want =
        r.role ? absl::StrCat("(", RoleName(*r.role), ")") : std::string("no token needed");
    EXPECT_TRUE(absl::StrContains(summary, want))
        << r.method << " " << r.pattern << ": docs/openapi.yaml's summary \"" << summary
        << "\" should name " << want;
  }

  // docs/operations.md's role table: "| `role` | may | `GET /path`, ... |".
  std::ifstream in(SourceDir() + "/docs/operations.md");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  std::map<std::pair<std::string, std::string>, std::string> listed;  // route -> role
  for (absl::string_view line : absl::StrSplit(text.str(), '\n')) {
    std::vector<std::string> cells = absl::StrSplit(line, " | ");
    if (cells.size() != 3 || !absl::StartsWith(cells[0], "| `")) continue;
    const std::string role(absl::StripSuffix(absl::StripPrefix(cells[0], "| `"), "`"));
    if (!ParseRole(role).ok()) continue;
    for (absl::string_view item : absl::StrSplit(absl::StripSuffix(cells[2], " |"), ", ")) {
      std::vector<std::string> words = absl::StrSplit(absl::StripAsciiWhitespace(item), ' ');
      if (words.size() != 2) continue;
      listed[{Lower(std::string(absl::StripPrefix(words[0], "`"))),
              std::string(absl::StripSuffix(words[1], "`"))}] = role;
    }
  }
  std::map<std::pair<std::string, std::string>, std::string> needed;
  for (const Route& r : api.routes()) {
    if (r.role) needed[{Lower(r.method), r.pattern}] = std::string(RoleName(*r.role));
  }
  EXPECT_EQ(listed, needed) << "docs/operations.md's role table (\"API tokens and roles\") and "
                               "the server's routes differ";
}

}  // namespace
}  // namespace runloom::api
