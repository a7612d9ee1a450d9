// BackendRegistry: a backend URL to the factory of its backend, by scheme.
#include "runloom/backend.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include <utility>

namespace runloom {
namespace {

// The scheme of `url` ("" for a plain path): letters, digits, '+', '-', '.'
// after a letter, up to the first ':'.
absl::string_view SchemeOf(absl::string_view url) {
  if (url.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(url[0]))) return {};
  for (size_t i = 1; i < url.size(); ++i) {
    const char c = url[i];
    if (c == ':') return url.substr(0, i);
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
      return {};
    }
  }
  return {};
}

}  // namespace

std::string RedactedUrl(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  const size_t auth = scheme_end + 3;
  // The authority ends at the first '/', '?' or '#'; its userinfo at the
  // last '@' before that.
  const size_t authority_end = url.find_first_of("/?#", auth);
  const size_t at =
      url.rfind('@', authority_end == std::string::npos ? std::string::npos : authority_end);
  if (at == std::string::npos || at < auth) return url;
  const size_t colon = url.find(':', auth);
  if (colon == std::string::npos || colon > at) return url;
  return absl::StrCat(url.substr(0, colon + 1), "***", url.substr(at));
}

absl::Status BackendRegistry::Register(BackendFactory factory) {
  if (factory.schemes.empty() || !factory.open) {
    return absl::InvalidArgumentError(
        "BackendRegistry::Register: a factory needs at least one scheme and an open function");
  }
  for (const std::string& scheme : factory.schemes) {
    if (scheme.empty() || SchemeOf(absl::StrCat(scheme, ":")) != scheme) {
      return absl::InvalidArgumentError(absl::StrCat(
          "BackendRegistry::Register: '", scheme,
          "' is not a URL scheme (a letter, then letters, digits, '+', '-' or '.')"));
    }
    if (by_scheme_.contains(scheme)) {
      return absl::AlreadyExistsError(
          absl::StrCat("BackendRegistry::Register: scheme '", scheme, "' has a backend already"));
    }
  }
  if (factory.plain_paths && plain_paths_.has_value()) {
    return absl::AlreadyExistsError(
        "BackendRegistry::Register: plain paths open another backend already");
  }
  const size_t index = factories_.size();
  for (const std::string& scheme : factory.schemes) by_scheme_[scheme] = index;
  if (factory.plain_paths) plain_paths_ = index;
  factories_.push_back(std::move(factory));
  return absl::OkStatus();
}

std::string BackendRegistry::AcceptedForms() const {
  std::string out;
  for (size_t i = 0; i < factories_.size(); ++i) {
    if (i > 0) absl::StrAppend(&out, i + 1 == factories_.size() ? ", or " : ", ");
    absl::StrAppend(&out, factories_[i].forms);
  }
  return out;
}

absl::StatusOr<Backend> BackendRegistry::Open(const std::string& url,
                                              const BackendOptions& options) const {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("backend URL '", RedactedUrl(url), "': ", why,
                                                   " (accepted: ", AcceptedForms(), ")"));
  };
  if (url.empty()) return bad("empty");
  const absl::string_view scheme = SchemeOf(url);
  std::optional<size_t> index;
  if (scheme.empty() || url == ":memory:") {
    index = plain_paths_;
    if (!index.has_value()) return bad("a plain path, but no backend here opens files");
  } else if (auto it = by_scheme_.find(scheme); it != by_scheme_.end()) {
    index = it->second;
  } else {
    return bad(absl::StrCat("unknown scheme '", scheme, "'"));
  }
  const BackendFactory& f = factories_[*index];
  std::string target = url;
  if (f.parse) {
    absl::StatusOr<std::string> parsed = f.parse(url);
    if (!parsed.ok()) {
      if (parsed.status().code() == absl::StatusCode::kInvalidArgument) {
        return bad(parsed.status().message());
      }
      return parsed.status();
    }
    target = *std::move(parsed);
  }
  return f.open(target, options);
}

}  // namespace runloom
