// `runloom token create|list|revoke` end to end on SQLite files: the token is
// printed once and found nowhere else (not in the database file, not in any
// later output); bad flags exit 2 writing nothing.
#include "core/digest.h"

#include "cli_harness.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <string>
#include <vector>

namespace runloom::testing {
namespace {

ChildSetup Clean(const std::string& cwd) {
  return ChildSetup{cwd, {{"RUNLOOM_DB", ""}, {"RUNLOOM_QUEUE", ""}}};
}

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// The token of `create`'s stdout (text form: the token alone on its line).
// A plain scan, not std::regex: GCC 12's ASan build (-O1 -Werror) reports a
// false maybe-uninitialized inside <regex>.
std::string TokenIn(const std::string& out) {
  for (size_t at = out.find("rl_"); at != std::string::npos; at = out.find("rl_", at + 1)) {
    if (at + 3 + 64 > out.size()) break;
    std::string hex = out.substr(at + 3, 64);
    if (hex.find_first_not_of("0123456789abcdef") == std::string::npos) return "rl_" + hex;
  }
  return "";
}

// Every byte of the database and its WAL/SHM files.
std::string DatabaseBytes(const std::string& db) {
  std::string all;
  for (const char* suffix : {"", "-wal", "-shm"}) all += ReadFile(db + suffix);
  return all;
}

nlohmann::json ListJson(const std::string& db) {
  Result r = RunStdout({"token", "list", "--json", "--db", db});
  EXPECT_EQ(r.code, 0) << r.out;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{{"tokens", {}}};
}

TEST(CliToken, CreatePrintsTheTokenOnceAndOnlyItsHashIsStored) {
  const std::string dir = MakeTempDir("clitok");
  const std::string db = dir + "/t.db";
  Result created =
      RunCli({"token", "create", "--name", "ci", "--role", "operator", "--db", db}, Clean(dir));
  ASSERT_EQ(created.code, 0) << created.out;
  const std::string token = TokenIn(created.out);
  ASSERT_FALSE(token.empty()) << created.out;
  EXPECT_NE(created.out.find("will not be shown again"), std::string::npos) << created.out;
  EXPECT_EQ(created.out.find(token), created.out.rfind(token)) << "printed twice";
  const std::string hash = Sha256Hex(token);

  // Later commands, in every output form, never show the token or its hash.
  std::vector<Result> later = {
      RunCli({"token", "list", "--db", db}, Clean(dir)),
      RunCli({"token", "list", "--json", "--db", db}, Clean(dir)),
      RunCli({"token", "create", "--name", "ci", "--role", "admin", "--db", db}, Clean(dir)),
      RunCli({"token", "revoke", "ci", "--json", "--db", db}, Clean(dir)),
      RunCli({"token", "list", "--db", db}, Clean(dir)),
      RunCli({"token", "revoke", "ci", "--db", db}, Clean(dir)),
  };
  EXPECT_EQ(later[0].code, 0);
  EXPECT_NE(later[0].out.find("ci"), std::string::npos) << later[0].out;
  EXPECT_EQ(later[2].code, 2) << later[2].out;  // the name is taken
  EXPECT_EQ(later[3].code, 0) << later[3].out;
  EXPECT_EQ(later[5].code, 2) << later[5].out;  // revoked already
  for (const Result& r : later) {
    EXPECT_EQ(r.out.find(token), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(hash), std::string::npos) << r.out;
  }
  // The database keeps the hash, never the token.
  const std::string bytes = DatabaseBytes(db);
  EXPECT_EQ(bytes.find(token), std::string::npos);
  EXPECT_EQ(bytes.find(token.substr(3)), std::string::npos) << "the random part is stored";
  EXPECT_NE(bytes.find(hash), std::string::npos) << "the hash is not in the file";
}

TEST(CliToken, JsonCreateListAndRevoke) {
  const std::string dir = MakeTempDir("clitokjson");
  const std::string db = dir + "/t.db";
  Result c =
      RunStdout({"token", "create", "--name", "alice", "--role", "approver", "--json", "--db", db});
  ASSERT_EQ(c.code, 0) << c.out;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j.size(), 4u) << j;
  EXPECT_EQ(j["name"], "alice");
  EXPECT_EQ(j["role"], "approver");
  EXPECT_FALSE(TokenIn(j["token"].get<std::string>()).empty()) << j;
  const std::string id = j["id"];
  ASSERT_EQ(id.rfind("tok_", 0), 0u) << id;
  ASSERT_EQ(RunStdout({"token", "create", "--name", "bob", "--role", "viewer", "--db", db}).code,
            0);

  nlohmann::json list = ListJson(db);
  ASSERT_EQ(list["tokens"].size(), 2u) << list;
  for (const nlohmann::json& t : list["tokens"]) {
    EXPECT_EQ(t.size(), 5u) << t;  // id, name, role, created_at, revoked_at
    EXPECT_TRUE(t["revoked_at"].is_null()) << t;
  }
  Result by_id = RunStdout({"token", "revoke", id, "--db", db});
  EXPECT_EQ(by_id.code, 0) << by_id.out;
  EXPECT_NE(by_id.out.find("alice"), std::string::npos) << by_id.out;
  Result by_name = RunStdout({"token", "revoke", "bob", "--db", db});
  EXPECT_EQ(by_name.code, 0) << by_name.out;
  list = ListJson(db);
  for (const nlohmann::json& t : list["tokens"]) EXPECT_TRUE(t["revoked_at"].is_string()) << t;
  Result unknown = RunCli({"token", "revoke", "nobody", "--db", db}, Clean(dir));
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  EXPECT_EQ(Lines(unknown.out), 1) << unknown.out;
}

TEST(CliToken, BadRoleOrNameExitsTwoWithOneLineAndWritesNothing) {
  const std::string dir = MakeTempDir("clitokbad");
  const std::string db = dir + "/t.db";
  const std::vector<std::vector<std::string>> bad = {
      {"--name", "ci", "--role", "root"},
      {"--name", "ci", "--role", "Admin"},
      {"--name", "two words", "--role", "viewer"},
      {"--name", std::string(65, 'x'), "--role", "viewer"},
      {"--name", "tab\there", "--role", "viewer"},
      {"--name", "tok_1234", "--role", "viewer"},
      {"--name", "", "--role", "viewer"},
  };
  for (const std::vector<std::string>& flags : bad) {
    std::vector<std::string> args = {"token", "create", "--db", db};
    args.insert(args.end(), flags.begin(), flags.end());
    Result r = RunCli(args, Clean(dir));
    EXPECT_EQ(r.code, 2) << flags[1] << " " << flags[3] << ": " << r.out;
    EXPECT_EQ(Lines(r.out), 1) << r.out;
    EXPECT_TRUE(TokenIn(r.out).empty()) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(db)) << "a refused create opened the database";
  // Listing a database that is not there creates nothing either.
  Result missing = RunCli({"token", "list", "--db", db}, Clean(dir));
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_FALSE(std::filesystem::exists(db));
  // On an existing database a refused create leaves the tokens as they were.
  ASSERT_EQ(RunStdout({"token", "create", "--name", "ok", "--role", "admin", "--db", db}).code, 0);
  ASSERT_EQ(
      RunCli({"token", "create", "--name", "x y", "--role", "admin", "--db", db}, Clean(dir)).code,
      2);
  EXPECT_EQ(ListJson(db)["tokens"].size(), 1u);
}

TEST(CliToken, RunloomDbNamesTheDatabase) {
  const std::string dir = MakeTempDir("clitokenv");
  const std::string db = dir + "/env.db";
  ChildSetup env{dir, {{"RUNLOOM_DB", db}, {"RUNLOOM_QUEUE", ""}}};
  ASSERT_EQ(RunCli({"token", "create", "--name", "ci", "--role", "viewer"}, env).code, 0);
  Result list = RunCli({"token", "list"}, env);
  EXPECT_EQ(list.code, 0) << list.out;
  EXPECT_NE(list.out.find("viewer"), std::string::npos) << list.out;
  EXPECT_EQ(ListJson(db)["tokens"].size(), 1u);
}

}  // namespace
}  // namespace runloom::testing
