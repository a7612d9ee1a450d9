#include "cli/cli_common.h"

#include "runloom/clock.h"

#include "core/bounded_json.h"
#include "core/duration.h"
#include "core/log_line.h"
#include "core/status_macros.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>
#include <sys/stat.h>

namespace runloom::cli {
namespace {

constexpr char kDbEnv[] = "RUNLOOM_DB";
constexpr char kQueueEnv[] = "RUNLOOM_QUEUE";
constexpr char kQueueForm[] = "redis://host:port[/n]";
constexpr int kMaxPort = 65535;

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The file a --db value names, "" for an in-memory database or a URL that
// OpenBackend will refuse or that names a server.
std::string SqliteFileOf(const std::string& db) {
  if (db == ":memory:" || db == "sqlite::memory:") return "";
  if (absl::StartsWith(db, "sqlite://")) return db.substr(sizeof("sqlite://") - 1);
  if (db.find("://") != std::string::npos || absl::StartsWith(db, "sqlite:")) return "";
  return db;
}

// " (from RUNLOOM_DB)" when the value came from the environment.
std::string FromEnv(const std::string& from) {
  return from.empty() || absl::StartsWith(from, "--") ? "" : absl::StrCat(" (from ", from, ")");
}

bool IsNumber(absl::string_view s) {
  constexpr size_t kMaxDigits = 9;  // fits an int
  return !s.empty() && s.size() <= kMaxDigits && std::all_of(s.begin(), s.end(), [](char ch) {
    return absl::ascii_isdigit(static_cast<unsigned char>(ch));
  });
}

bool IsHost(absl::string_view host) {
  if (absl::ConsumePrefix(&host, "[") && absl::ConsumeSuffix(&host, "]")) {  // [IPv6]
    return !host.empty() && std::all_of(host.begin(), host.end(), [](char ch) {
      return absl::ascii_isxdigit(static_cast<unsigned char>(ch)) || ch == ':' || ch == '.';
    });
  }
  return !host.empty() && std::all_of(host.begin(), host.end(), [](char ch) {
    return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' ||
           ch == '_';
  });
}

// Why `url` is not redis://host:port[/n]; "" when it is.
std::string QueueUrlFault(absl::string_view url) {
  if (!absl::ConsumePrefix(&url, "redis://")) return "the scheme must be redis://";
  const size_t colon = url.rfind(':', url.find('/'));
  const size_t bracket = url.find(']');
  if (colon == absl::string_view::npos ||
      (absl::StartsWith(url, "[") && (bracket == absl::string_view::npos || colon < bracket))) {
    return "no port";
  }
  if (!IsHost(url.substr(0, colon))) {
    return "the host must be a name or an address (letters, digits, '.', '-', '_'; IPv6 in [])";
  }
  url.remove_prefix(colon + 1);
  const absl::string_view port = url.substr(0, std::min(url.find('/'), url.size()));
  int number = 0;
  if (!IsNumber(port) || !absl::SimpleAtoi(port, &number) || number < 1 || number > kMaxPort) {
    return absl::StrCat("the port must be a number from 1 to ", kMaxPort);
  }
  url.remove_prefix(port.size());
  if (url.empty()) return "";
  url.remove_prefix(1);  // '/'
  if (!IsNumber(url)) return "after the port comes nothing, or '/' and a database number";
  return "";
}

// An unreachable server is the flag's fault (exit 2); a locked or failing
// SQLite file is transient (exit 1).
bool UsesServer(const CommonFlags& c) {
  return !c.queue.empty() ||
         (c.db.find("://") != std::string::npos && !absl::StartsWith(c.db, "sqlite:"));
}

}  // namespace

CommonFlags WithEnvironment(CommonFlags c, bool db_given, bool queue_given) {
  c.db_from = db_given ? "--db" : "";
  c.queue_from = queue_given ? "--queue" : "";
  const char* db = std::getenv(kDbEnv);
  if (!db_given && db != nullptr && *db != '\0') {
    c.db = db;
    c.db_from = kDbEnv;
  }
  const char* queue = std::getenv(kQueueEnv);
  if (!queue_given && queue != nullptr && *queue != '\0') {
    c.queue = queue;
    c.queue_from = kQueueEnv;
  }
  return c;
}

namespace {
std::atomic<LogFormat> stderr_format{LogFormat::kText};
}  // namespace

void SetStderrFormat(LogFormat format) { stderr_format.store(format); }

void PrintStderr(LogLevel level, const std::string& text) {
  if (stderr_format.load() == LogFormat::kText) {
    std::cerr << text << "\n";
    return;
  }
  // One write, so a line of the engine's logger never lands inside it.
  const std::string line =
      FormatLogLine(LogFormat::kJson, RealClock()->Now(), level, text, {}) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

absl::StatusOr<LogFormat> LogFormatSetting(const std::optional<std::string>& flag) {
  std::string source = "--log-format";
  std::string name = flag.value_or("");
  if (!flag.has_value()) {
    const char* env = std::getenv("RUNLOOM_LOG_FORMAT");
    if (env == nullptr || *env == '\0') return LogFormat::kText;
    source = "RUNLOOM_LOG_FORMAT";
    name = env;
  }
  const std::optional<LogFormat> format = ParseLogFormat(name);
  if (!format.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": unknown log format '", name, "'; use text or json"));
  }
  return *format;
}

int BadInput(const std::string& message) {
  PrintStderr(LogLevel::kError, absl::StrCat("runloom: error: ", message));
  return kExitBadInput;
}

int Failure(const std::string& message) {
  PrintStderr(LogLevel::kError, absl::StrCat("runloom: error: ", message));
  return kExitNotCompleted;
}

int DbOpenFailure(const CommonFlags& c, const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return BadInput(std::string(s.message()));
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      if (UsesServer(c)) return BadInput(std::string(s.message()));
      return Failure(std::string(s.message()));
    default:
      return Failure(std::string(s.message()));
  }
}

absl::StatusOr<nlohmann::json> ParseInputFlags(const std::vector<std::string>& inputs,
                                               const std::string& input_file) {
  nlohmann::json given = nlohmann::json::object();
  if (!input_file.empty()) {
    RUNLOOM_ASSIGN_OR_RETURN(given, ReadJsonFileBounded(input_file, "input file"));
    if (!given.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input file '", input_file, "' must hold a JSON object of inputs"));
    }
  }
  // An --input overrides the same key from --input-file; two --input flags
  // for one key are a mistake, not a last-wins.
  std::set<std::string> flagged;
  for (const std::string& kv : inputs) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input '", kv, "' is malformed; write --input name=value"));
    }
    std::string key = kv.substr(0, eq);
    if (!flagged.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input '", key, "' is given more than once; give each input once"));
    }
    given[key] = kv.substr(eq + 1);
  }
  return given;
}

int ExitForError(const absl::Status& s) {
  PrintStderr(LogLevel::kError, absl::StrCat("runloom: error: ", s.message()));
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kInvalidArgument:
      return kExitBadInput;
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kFailedPrecondition:
      return kExitConflict;
    default:
      return kExitNotCompleted;
  }
}

int RunReadFailure(const CommonFlags& c, const std::string& run_id, const absl::Status& s) {
  if (s.code() == absl::StatusCode::kNotFound) {
    return BadInput(absl::StrCat("run '", run_id, "' not found in ", RedactedUrl(c.db)));
  }
  if (s.code() == absl::StatusCode::kInvalidArgument) return BadInput(std::string(s.message()));
  return Failure(std::string(s.message()));
}

std::string FirstLine(const std::string& s) {
  size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

std::string ShellQuote(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return absl::ascii_isalnum(static_cast<unsigned char>(ch)) ||
           std::string_view("-_./:=@%+,").find(ch) != std::string_view::npos;
  });
  if (plain) return s;
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

std::string BackendArgs(const CommonFlags& c) {
  std::string out = absl::StrCat(" --db ", ShellQuote(RedactedUrl(c.db)));
  if (!c.queue.empty()) absl::StrAppend(&out, " --queue ", ShellQuote(c.queue));
  return out;
}

std::string DefaultReviewer() {
  const char* u = std::getenv("USER");
  return u != nullptr && *u != '\0' ? u : "cli";
}

std::optional<HostPort> ParseHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535) {
    return std::nullopt;
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return HostPort{.host = std::move(host), .port = static_cast<uint16_t>(port)};
}

absl::StatusOr<absl::Duration> PositiveDurationFlag(const char* flag, const std::string& value) {
  auto d = ParseDuration(value);
  if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", d.status().message()));
  if (*d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " must be positive"));
  }
  return d;
}

absl::Status CheckSyncFlag(const CommonFlags& c) {
  if (c.sync != "normal" && c.sync != "full") {
    return absl::InvalidArgumentError("--sync must be normal or full");
  }
  return absl::OkStatus();
}

absl::Status CheckRunsInFlight(int runs_in_flight) {
  if (runs_in_flight < 0 || runs_in_flight > kMaxRunsInFlight) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--runs-in-flight must be from 0 (as many as --executors) to ", kMaxRunsInFlight,
        " (each run held is a fiber with two memory mappings; Linux allows 65,530 a process by "
        "default)"));
  }
  return absl::OkStatus();
}

absl::Status CheckQueueUrl(const CommonFlags& c) {
  if (c.queue.empty()) return absl::OkStatus();
  const std::string fault = QueueUrlFault(c.queue);
  if (fault.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(c.queue_from.empty() ? "--queue" : c.queue_from, " '", absl::CHexEscape(c.queue),
                   "' is not a queue URL: ", fault, " (accepted: ", kQueueForm, ")"));
}

absl::StatusOr<Backend> OpenDb(const CommonFlags& c, const TransportOptions& transport,
                               bool long_lived) {
  RUNLOOM_RETURN_IF_ERROR(CheckQueueUrl(c));
  BackendOptions o;
  o.long_lived = long_lived;
  o.durability = c.sync;
  o.transport = transport;
  o.queue_url = c.queue;
  auto b = OpenBackend(c.db, o);
  if (!b.ok()) {
    return Annotate(b.status(), absl::StrCat("opening ", RedactedUrl(c.db), FromEnv(c.db_from)));
  }
  return b;
}

absl::StatusOr<Backend> OpenExistingDb(const CommonFlags& c) {
  RUNLOOM_RETURN_IF_ERROR(CheckQueueUrl(c));
  const std::string path = SqliteFileOf(c.db);
  if (!path.empty() && !FileExists(path)) {
    return absl::NotFoundError(absl::StrCat("no database at '", c.db, "'", FromEnv(c.db_from),
                                            "; pass --db with the file `runloom run` used"));
  }
  return OpenDb(c);
}

absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(const CommonFlags& c) {
  auto backend = OpenExistingDb(c);
  if (!backend.ok()) return backend.status();
  auto engine = Engine::Open({}, *std::move(backend));
  if (!engine.ok()) return absl::InternalError(engine.status().message());
  return engine;
}

SignalWatcher::SignalWatcher() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  thread_ = std::thread([this] {
    timespec tick{0, 100'000'000};  // wake to notice done_
    while (!done_.load()) {
      int sig = sigtimedwait(&set_, nullptr, &tick);
      if (sig == SIGINT || sig == SIGTERM) {
        signalled_ = true;
        std::function<void()> fn;
        {
          std::lock_guard<std::mutex> l(mu_);
          fn = on_signal_;
        }
        if (fn) fn();
      }
    }
  });
}

SignalWatcher::~SignalWatcher() {
  done_ = true;
  thread_.join();
}

void SignalWatcher::OnSignal(std::function<void()> fn) {
  std::lock_guard<std::mutex> l(mu_);
  on_signal_ = std::move(fn);
}

}  // namespace runloom::cli
