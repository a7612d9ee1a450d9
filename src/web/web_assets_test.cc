#include "web/web_assets.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace runloom::web {
namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(WebAssets, EveryFileInWebIsEmbeddedByteForByte) {
  std::filesystem::path dir = std::filesystem::path(RUNLOOM_SOURCE_DIR_DEFAULT) / "web";
  std::set<std::string> on_disk;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    if (e.path().filename() == "emulator.js") {
      // The fixture emulator is for the build's web-emulator/ only: the
      // server never answers the UI's requests from fixtures.
      EXPECT_EQ(FindAsset("/ui/emulator.js"), nullptr) << "the emulator must not be embedded";
      continue;
    }
    on_disk.insert(e.path().filename().string());
    const Asset* a = FindAsset("/ui/" + e.path().filename().string());
    ASSERT_NE(a, nullptr) << e.path() << " is not embedded: add it to src/web/CMakeLists.txt";
    EXPECT_EQ(a->body, ReadFile(e.path())) << e.path();
  }
  // And the one generated at build time (vocabulary.js).
  EXPECT_EQ(on_disk.size() + 1, kAssetCount) << "an embedded file no longer exists in web/";
}

// The UI's vocabulary is generated from the engine's tables: every status,
// the terminal ones (budget_stopped and unresolved among them), every
// decision and event type.
TEST(WebAssets, TheVocabularyIsTheEnginesAndIsEmbedded) {
  const Asset* a = FindAsset("/ui/vocabulary.js");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(a->body, ReadFile(RUNLOOM_WEB_VOCABULARY));
  const std::string body(a->body);
  EXPECT_NE(body.find(R"(export const STATUSES = ["queued","running","paused","waiting",)"
                      R"("completed","rejected","unresolved","budget_stopped","failed","cancelled"];)"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find(R"(export const TERMINAL = new Set(["completed","rejected","unresolved",)"
                      R"("budget_stopped","failed","cancelled"]);)"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find(R"(export const DECISIONS = ["approve","edit","reject","request_revision"];)"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find(R"("run.created")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("llm.call")"), std::string::npos) << body;
}

TEST(WebAssets, RootIsTheIndexAndTypesAreSet) {
  const Asset* root = FindAsset("/");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->path, "/ui/index.html");
  EXPECT_EQ(root->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(FindAsset("/ui/app.js")->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(FindAsset("/ui/style.css")->content_type, "text/css; charset=utf-8");
  EXPECT_EQ(FindAsset("/ui/../etc/passwd"), nullptr);
  EXPECT_EQ(FindAsset("/ui/missing.js"), nullptr);
}

}  // namespace
}  // namespace runloom::web
