// An http write that carries secrets (a header from a secret:// reference,
// a body field from a secret input) sends them, and writes them nowhere: not
// in the database or its WAL (the write ledger included: the answer echoes
// the body), nor in any CLI output.
#include "actions_server/actions_server.h"
#include "cli_harness.h"
#include "gtest/gtest.h"

#include <string>
#include <vector>

namespace runloom::testing {
namespace {

constexpr char kSecretWriteWorkflow[] = R"(name: secretwrite
inputs:
  url: {type: string}
  key: {type: string, secret: true}
steps:
  - id: apply
    kind: http
    method: POST
    url: "{{ inputs.url }}/actions"
    headers: {Authorization: "Bearer secret://HDR_TOKEN"}
    write: true
    body: {token: "{{ inputs.key }}"}
)";

TEST(HttpWriteSecrets, AreSentButWrittenNowhere) {
  const std::string dir = MakeTempDir("httpsecret");
  const std::string db = dir + "/s.db";
  const std::string body_secret = "b0dy-s3cr3t-" + std::to_string(getpid());
  const std::string header_secret = "h34der-s3cr3t-" + std::to_string(getpid());
  WriteFile(dir + "/s.yaml", kSecretWriteWorkflow);
  absl::StatusOr<std::unique_ptr<examples::ActionsServer>> server =
      examples::ActionsServer::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  const ChildSetup env{.env = {{"RUNLOOM_SECRET_BODY_KEY", body_secret},
                               {"RUNLOOM_SECRET_HDR_TOKEN", header_secret}}};
  Result run = RunCli({"run", dir + "/s.yaml", "--db", db, "--input", "url=" + (*server)->url(),
                       "--input", "key=secret://BODY_KEY"},
                      env);
  ASSERT_EQ(run.code, 0) << run.out;
  // Sent: the server applied the action with the secret in it.
  std::vector<nlohmann::json> applied = (*server)->Applied();
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0]["request"]["token"], body_secret);

  const std::string run_id = RunIdFrom(run.out);
  ASSERT_FALSE(run_id.empty()) << run.out;
  std::string everything = run.out;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status", run_id, "--db", db, "--json"},
        std::vector<std::string>{"events", run_id, "--db", db, "--json"}}) {
    Result r = RunCli(args);
    EXPECT_EQ(r.code, 0) << r.out;
    everything += r.out;
  }
  for (const std::string& secret : {body_secret, header_secret}) {
    EXPECT_EQ(everything.find(secret), std::string::npos) << "printed: " << everything;
    for (const std::string& file : {db, db + "-wal"}) {
      EXPECT_EQ(ReadFile(file).find(secret), std::string::npos) << "in " << file;
    }
  }
  // The echoed answer was recorded scrubbed.
  nlohmann::json st = StatusJson(db, run_id);
  ASSERT_EQ(st["steps"].size(), 1u);
  EXPECT_EQ(st["steps"][0]["output"]["body"]["request"]["token"], "[secret]");
}

}  // namespace
}  // namespace runloom::testing
