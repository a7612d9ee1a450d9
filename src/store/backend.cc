// OpenBackend: a backend URL to the factory of its backend.
#include "runloom/backend.h"

#include "runloom/postgres.h"
#include "runloom/sqlite.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace runloom {
namespace {

constexpr char kAccepted[] =
    "accepted: sqlite:///abs/path.db, sqlite://relative/path.db, sqlite::memory:, "
    "a plain file path, or postgres://user@host:port/dbname";

absl::Status BadUrl(const std::string& url, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("backend URL '", RedactedUrl(url), "': ", why, " (", kAccepted, ")"));
}

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

// The SQLite path a "sqlite:..." URL names.
absl::StatusOr<std::string> SqlitePath(const std::string& url) {
  absl::string_view rest = absl::string_view(url).substr(absl::string_view("sqlite:").size());
  if (rest == ":memory:") return std::string(":memory:");
  if (!absl::StartsWith(rest, "//")) {
    return BadUrl(url, "after 'sqlite:' comes '//' and a path, or ':memory:'");
  }
  rest.remove_prefix(2);
  if (rest.empty() || rest == "/") return BadUrl(url, "no database path");
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return BadUrl(url, "query strings and fragments are not supported");
  }
  // sqlite:///abs/path keeps its leading '/'; sqlite://rel/path is relative.
  return std::string(rest);
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

absl::StatusOr<Backend> OpenBackend(const std::string& url, const BackendOptions& options) {
  if (url.empty()) return BadUrl(url, "empty");
  std::string path;
  const absl::string_view scheme = SchemeOf(url);
  if (scheme.empty() || url == ":memory:") {
    path = url;  // a plain path: today's `--db path`
  } else if (scheme == "postgres" || scheme == "postgresql") {
    if (!absl::StartsWith(absl::string_view(url).substr(scheme.size()), "://")) {
      return BadUrl(url, absl::StrCat("after '", scheme, ":' comes '//user@host:port/dbname'"));
    }
    PostgresOptions o;
    o.lock_timeout = options.lock_timeout;
    o.transport = options.transport;
    o.queue_url = options.queue_url;
    return OpenPostgres(url, o);
  } else if (scheme == "sqlite") {
    absl::StatusOr<std::string> p = SqlitePath(url);
    if (!p.ok()) return p.status();
    path = *std::move(p);
  } else {
    return BadUrl(url, absl::StrCat("unknown scheme '", scheme, "'"));
  }
  if (!options.queue_url.empty()) {
    // Checked before the file is opened, so nothing is created.
    return absl::InvalidArgumentError(absl::StrCat(
        "a Redis queue (the queue URL) needs a PostgreSQL store, but '", url,
        "' is SQLite (whose jobs always travel on its own queue table): drop the queue URL, "
        "or use --db postgres://user@host:port/dbname"));
  }
  SqliteOptions o;
  o.clock = options.clock;
  o.synchronous = options.durability;
  o.busy_timeout = options.lock_timeout;
  o.transport = options.transport;
  return OpenSqlite(path, o);
}

}  // namespace runloom
