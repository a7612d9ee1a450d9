// The exec step kind: JSON on stdin -> subprocess -> one JSON object on stdout.
#include "runloom/workflow.h"

#include "core/bounded_json.h"
#include "core/duration.h"
#include "core/status_macros.h"
#include "steps/builtin_steps.h"
#include "steps/internal/config.h"
#include "steps/internal/snippet.h"
#include "steps/internal/subprocess.h"
#include "workflow/template.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace runloom {
namespace {

using steps_internal::ConfigReader;
using steps_internal::SubprocessEnd;
using steps_internal::SubprocessResult;
using steps_internal::SubprocessSpec;

constexpr int kExitTempFail = 75;  // EX_TEMPFAIL from sysexits.h: "try again later"
using steps_internal::SnippetWithSize;

struct ExecConfig {
  std::vector<std::string> argv;
  nlohmann::json input = nlohmann::json::object();
  std::optional<std::string> cwd;
  std::map<std::string, std::string> env;
};

bool IsEnvName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) != 0) {
    return false;
  }
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') {
      return false;
    }
  }
  return true;
}

absl::Status ParseCommand(const ConfigReader& r, ExecConfig& c) {
  if (!r.Has("command")) {
    return r.Missing("command", "command: \"python3 step.py\" or command: [python3, step.py]");
  }
  const nlohmann::json& cmd = r.Get("command");
  if (cmd.is_string()) {
    const std::string& text = cmd.get_ref<const std::string&>();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
      return r.Error("command", "must not be empty");
    }
    c.argv = {"/bin/sh", "-c", text};  // CodeArgument finds the script at [2]
    return absl::OkStatus();
  }
  if (cmd.is_array() && !cmd.empty()) {
    for (size_t i = 0; i < cmd.size(); ++i) {
      if (!cmd[i].is_string() || (i == 0 && cmd[i].get_ref<const std::string&>().empty())) {
        return r.Error("command", absl::StrCat("must be a list of strings with a program first; "
                                               "element ",
                                               i, " is ", cmd[i].dump()));
      }
      c.argv.push_back(cmd[i].get<std::string>());
    }
    return absl::OkStatus();
  }
  return r.Error("command", absl::StrCat("must be a string (run with /bin/sh -c) or a non-empty "
                                         "list of strings (run directly), got ",
                                         cmd.dump()));
}

absl::Status ParseEnv(const ConfigReader& r, ExecConfig& c) {
  if (!r.Has("env") || r.Deferred("env")) {
    return absl::OkStatus();
  }
  const nlohmann::json& env = r.Get("env");
  if (!env.is_object()) {
    return r.Error("env", absl::StrCat("must be a map of NAME: value, got ", env.dump()));
  }
  for (const auto& [name, value] : env.items()) {
    if (!IsEnvName(name)) {
      return r.Error("env",
                     absl::StrCat("has a bad variable name '", name,
                                  "'; use letters, digits and _, not starting with a digit"));
    }
    if (value.is_string()) {
      c.env[name] = value.get<std::string>();
    } else if (value.is_number() || value.is_boolean()) {
      c.env[name] = value.dump();
    } else {
      return r.Error("env", absl::StrCat("value of '", name,
                                         "' must be a string, number or bool, got ", value.dump()));
    }
  }
  return absl::OkStatus();
}

// The argv element that an interpreter runs as code: the script after a
// shell's -c, or the program after python's -c or perl/ruby/node's -e. -1
// when there is none. `env [NAME=value...] program ...` is looked through.
int CodeArgument(const std::vector<std::string>& argv) {
  size_t i = 0;
  auto base = [&](size_t k) {
    const std::string& a = argv[k];
    return a.substr(a.rfind('/') == std::string::npos ? 0 : a.rfind('/') + 1);
  };
  if (!argv.empty() && base(0) == "env") {
    for (i = 1; i < argv.size() && (argv[i].find('=') != std::string::npos || argv[i][0] == '-');
         ++i) {
    }
    if (i >= argv.size()) return -1;
  }
  const std::string program = base(i);
  static const auto* kShells =
      new std::set<std::string>{"sh", "bash", "dash", "zsh", "ksh", "ash", "fish", "mksh"};
  char flag = 0;
  if (kShells->count(program) > 0 || absl::StartsWith(program, "python")) {
    flag = 'c';
  } else if (program == "perl" || program == "ruby" || program == "node") {
    flag = 'e';
  } else {
    return -1;
  }
  for (size_t k = i + 1; k + 1 < argv.size(); ++k) {
    const std::string& a = argv[k];
    if (a.size() < 2 || a[0] != '-' || a[1] == '-') continue;  // not a short-option cluster
    if (a.find(flag) != std::string::npos) return static_cast<int>(k + 1);
  }
  return -1;
}

// Templates are substituted as text: inside code an interpreter runs, a
// value such as `$(touch pwned)` (or a model's output) would run too. Refused
// unless the step opts in with unsafe_shell_templates: true.
absl::Status CheckNoTemplatesInCode(const ConfigReader& r, const ExecConfig& c) {
  const int code = CodeArgument(c.argv);
  if (code < 0) return absl::OkStatus();
  const std::vector<std::string> refs = TemplateRefs(nlohmann::json(c.argv[code]));
  if (refs.empty()) return absl::OkStatus();
  return r.Error("command",
                 absl::StrCat("'{{ ", refs[0],
                              " }}' is inside the script the shell (or interpreter) runs, "
                              "so a value like $(touch pwned) would run as code (values may come "
                              "from users or models); pass it as data instead: as its own argument "
                              "(command: [sh, -c, 'echo \"$1\"', sh, '{{ ",
                              refs[0],
                              " }}']), in env:, or on stdin (input:); or, only for a trusted "
                              "value, set unsafe_shell_templates: true on the step"));
}

absl::StatusOr<ExecConfig> ParseExecConfig(const nlohmann::json& config, bool unresolved) {
  ConfigReader r("exec", config, unresolved);
  RUNLOOM_RETURN_IF_ERROR(
      r.CheckKeys({"command", "input", "cwd", "env", "unsafe_shell_templates"}));
  ExecConfig c;
  RUNLOOM_RETURN_IF_ERROR(ParseCommand(r, c));
  RUNLOOM_ASSIGN_OR_RETURN(std::optional<bool> unsafe, r.Bool("unsafe_shell_templates"));
  if (unresolved && !unsafe.value_or(false)) RUNLOOM_RETURN_IF_ERROR(CheckNoTemplatesInCode(r, c));
  if (r.Has("input")) {
    c.input = r.Get("input");
  }
  RUNLOOM_ASSIGN_OR_RETURN(c.cwd, r.String("cwd"));
  RUNLOOM_RETURN_IF_ERROR(ParseEnv(r, c));
  return c;
}

std::string ResolveCwd(const std::optional<std::string>& cwd, const std::string& working_dir) {
  if (!cwd.has_value()) {
    return working_dir;
  }
  if (cwd->empty() || (*cwd)[0] == '/' || working_dir.empty()) {
    return *cwd;
  }
  return absl::StrCat(working_dir, "/", *cwd);
}

std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) {
    return "";
  }
  size_t begin = text.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(begin, end + 1 - begin);
}

// A failure status carrying the stderr tail in its message and as a payload.
absl::Status Failure(absl::StatusCode code, const std::string& headline,
                     const std::string& stderr_tail) {
  std::string message = headline;
  if (!stderr_tail.empty()) {
    absl::StrAppend(&message, "\nstderr (last 4 KiB):\n", stderr_tail);
  }
  absl::Status status(code, message);
  if (!stderr_tail.empty()) {
    status.SetPayload(kStderrTailPayload, absl::Cord(stderr_tail));
  }
  return status;
}

std::string WithLastLine(const std::string& headline, const std::string& stderr_tail) {
  const std::string last = LastLine(stderr_tail);
  return last.empty() ? absl::StrCat(headline, " (no stderr output)")
                      : absl::StrCat(headline, ": ", last);
}

absl::StatusOr<nlohmann::json> ParseStdout(const std::string& out) {
  if (out.find_first_not_of(" \t\r\n") == std::string::npos) {
    return nlohmann::json::object();
  }
  absl::StatusOr<nlohmann::json> parsed = ParseJsonBounded(out, "step output", StepOutputLimits());
  if (!parsed.ok()) {
    if (IsLimitError(parsed.status())) return parsed.status();
    return absl::InvalidArgumentError(absl::StrCat(
        "step output is not a JSON object: ", SnippetWithSize(out), " (", parsed.status().message(),
        "); print exactly one JSON object on stdout and send logs to stderr"));
  }
  nlohmann::json value = *std::move(parsed);
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("step output is not a JSON object: got ",
                                                   value.type_name(), " ", SnippetWithSize(out),
                                                   "; print exactly one JSON object on stdout"));
  }
  return value;
}

absl::StatusOr<StepOutput> ToStepOutput(SubprocessResult& r) {
  switch (r.end) {
    case SubprocessEnd::kStopped:
      return absl::CancelledError(
          "exec: stopped (run cancelled, lease lost or engine stopping); the process group was "
          "killed");
    case SubprocessEnd::kTimedOut:
      return Failure(absl::StatusCode::kDeadlineExceeded,
                     absl::StrCat("exec: timed out after ", runloom::FormatDuration(r.elapsed),
                                  "; the process group was killed (raise the step's timeout?)"),
                     r.stderr_tail);
    case SubprocessEnd::kOutputTooLarge:
      return Failure(absl::StatusCode::kInvalidArgument,
                     absl::StrCat("exec: stdout exceeds ", steps_internal::kMaxStdoutBytes,
                                  " bytes; write large data to a file and print its path"),
                     r.stderr_tail);
    case SubprocessEnd::kSignaled:
      return Failure(
          absl::StatusCode::kUnknown,
          WithLastLine(absl::StrCat("killed by signal ", steps_internal::SignalName(r.term_signal)),
                       r.stderr_tail),
          r.stderr_tail);
    case SubprocessEnd::kExited:
      break;
  }
  if (r.exit_code == kExitTempFail) {
    return Failure(absl::StatusCode::kUnavailable,
                   WithLastLine("exit code 75 (EX_TEMPFAIL, temporary failure)", r.stderr_tail),
                   r.stderr_tail);
  }
  if (r.exit_code != 0) {
    return Failure(absl::StatusCode::kUnknown,
                   WithLastLine(absl::StrCat("exit code ", r.exit_code), r.stderr_tail),
                   r.stderr_tail);
  }
  RUNLOOM_ASSIGN_OR_RETURN(nlohmann::json output, ParseStdout(r.stdout_data));
  StepOutput out;
  out.output = std::move(output);
  out.stderr_tail = std::move(r.stderr_tail);
  return out;
}

class ExecStep final : public StepKind {
 public:
  absl::Status Validate(const StepDef& def) const override {
    return ParseExecConfig(def.config, /*unresolved=*/true).status();
  }

  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) override {
    RUNLOOM_ASSIGN_OR_RETURN(ExecConfig c, ParseExecConfig(config, /*unresolved=*/false));
    SubprocessSpec spec;
    spec.argv = std::move(c.argv);
    spec.env = std::move(c.env);
    // Who is running: lets a script log a correlation id or behave per attempt.
    spec.env["RUNLOOM_RUN_ID"] = ctx.run_id();
    spec.env["RUNLOOM_STEP_PATH"] = ctx.step_path();
    spec.env["RUNLOOM_ATTEMPT"] = std::to_string(ctx.attempt());
    spec.cwd = ResolveCwd(c.cwd, ctx.working_dir());
    spec.stdin_data = c.input.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    RUNLOOM_ASSIGN_OR_RETURN(SubprocessResult result, steps_internal::RunSubprocess(ctx, spec));
    return ToStepOutput(result);
  }
};

}  // namespace

std::shared_ptr<StepKind> NewExecStep() { return std::make_shared<ExecStep>(); }

}  // namespace runloom
