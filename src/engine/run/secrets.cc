#include "engine/run/secrets.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace runloom::engine_internal {
namespace {

constexpr char kEnvPrefix[] = "RUNLOOM_SECRET_";
constexpr char kFileVariable[] = "RUNLOOM_SECRETS_FILE";
constexpr int64_t kMaxSecretsFile = int64_t{1} << 20;

absl::StatusOr<std::string> FromFile(const std::string& path, const std::string& name) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(kFileVariable, "='", path, "' is not a file"));
  }
  if (st.st_uid != geteuid() || (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("secrets file '", path,
                     "' must be owned by this user and readable by no one else; run: "
                     "chmod 600 '",
                     path, "'"));
  }
  if (st.st_size > kMaxSecretsFile) {
    return absl::InvalidArgumentError(
        absl::StrCat("secrets file '", path, "' is over ", kMaxSecretsFile, " bytes"));
  }
  std::ifstream in(path);
  std::string line;
  const std::string key = name + "=";
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (absl::StartsWith(line, key)) return line.substr(key.size());
  }
  return absl::NotFoundError(absl::StrCat("no line ", name, "=... in secrets file '", path, "'"));
}

}  // namespace

absl::StatusOr<std::string> ResolveSecret(const std::string& name) {
  const std::string env = absl::StrCat(kEnvPrefix, name);
  if (const char* v = std::getenv(env.c_str()); v != nullptr) return std::string(v);
  const char* file = std::getenv(kFileVariable);
  if (file != nullptr && file[0] != '\0') {
    absl::StatusOr<std::string> v = FromFile(file, name);
    if (v.ok() || v.status().code() != absl::StatusCode::kNotFound) return v;
  }
  return absl::NotFoundError(
      absl::StrCat("secret '", name, "' is not set for this worker; set the environment variable ",
                   env, " or add ", name, "=... to the file named by ", kFileVariable,
                   " (mode 600), in every process that executes the run"));
}

void SecretScrubber::Add(const std::string& value) {
  if (value.empty()) return;
  runloom::MutexLock l(&mu_);
  if (std::find(values_.begin(), values_.end(), value) != values_.end()) return;
  values_.push_back(value);
  // Longest first, so a secret that contains another is replaced whole.
  std::sort(values_.begin(), values_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

void SecretScrubber::ScrubLocked(std::string& text) const {
  for (const std::string& v : values_) {
    if (text.find(v) != std::string::npos) absl::StrReplaceAll({{v, kScrubbed}}, &text);
  }
}

void SecretScrubber::ScrubLocked(nlohmann::json& value) const {
  if (value.is_string()) {
    ScrubLocked(value.get_ref<std::string&>());
  } else if (value.is_array()) {
    for (nlohmann::json& item : value) ScrubLocked(item);
  } else if (value.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = value.begin(); it != value.end(); ++it) {
      std::string key = it.key();
      ScrubLocked(key);
      nlohmann::json v = std::move(it.value());
      ScrubLocked(v);
      out[key] = std::move(v);
    }
    value = std::move(out);
  }
}

void SecretScrubber::Scrub(std::string& text) const {
  runloom::ReaderMutexLock l(&mu_);
  if (!values_.empty()) ScrubLocked(text);
}

void ScrubbingLogger::LogWithFields(LogLevel level, std::string_view message,
                                    const LogFields& fields) {
  std::string text(message);
  scrubber_->Scrub(text);
  base_->LogWithFields(level, text, fields);
}

void SecretScrubber::Scrub(nlohmann::json& value) const {
  runloom::ReaderMutexLock l(&mu_);
  if (!values_.empty()) ScrubLocked(value);
}

void SecretScrubber::Scrub(RunWrite& write) const {
  runloom::ReaderMutexLock l(&mu_);
  if (values_.empty()) return;
  for (StepRecord& r : write.steps) {
    ScrubLocked(r.output);
    ScrubLocked(r.error);
    ScrubLocked(r.stderr_tail);
  }
  for (Event& e : write.events) ScrubLocked(e.data);
  if (write.error.has_value()) ScrubLocked(*write.error);
  if (write.outcome.has_value()) ScrubLocked(*write.outcome);
  if (write.context.has_value()) ScrubLocked(*write.context);
}

void RunSecrets::Put(const std::string& run_id, nlohmann::json secrets) {
  runloom::MutexLock l(&mu_);
  secrets_[run_id] = std::move(secrets);
}

nlohmann::json RunSecrets::Get(const std::string& run_id) const {
  runloom::MutexLock l(&mu_);
  auto it = secrets_.find(run_id);
  return it != secrets_.end() ? it->second : nlohmann::json::object();
}

void RunSecrets::Erase(const std::string& run_id) {
  runloom::MutexLock l(&mu_);
  secrets_.erase(run_id);
}

}  // namespace runloom::engine_internal
