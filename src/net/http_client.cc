#include "net/http_client.h"

#include "core/fiber.h"
#include "runloom/mutex.h"

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

#include <cstdio>
#include <cstdlib>
#include <curl/curl.h>
#include <map>
#include <memory>
#include <thread>
#include <vector>

namespace runloom::net {
namespace {

absl::once_flag curl_init_once;

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// What the callbacks write into while a transfer runs.
struct Transfer {
  HttpResponse* response;
  size_t max_bytes;
  bool too_large = false;
  const std::function<bool()>* cancelled;
  bool was_cancelled = false;
  const std::function<void(std::string_view)>* on_data;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  if (t->response->body.size() + bytes > t->max_bytes) {
    t->too_large = true;
    return 0;  // curl stops with CURLE_WRITE_ERROR
  }
  t->response->body.append(data, bytes);
  if (*t->on_data) (*t->on_data)(std::string_view(data, bytes));
  return bytes;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  absl::string_view line(data, bytes);
  if (absl::StartsWith(line, "HTTP/")) {
    t->response->headers.clear();  // a new response (after 1xx): keep the last one's
    return bytes;
  }
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return bytes;
  t->response->headers.emplace_back(
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, colon))),
      std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  return bytes;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (*t->cancelled && (*t->cancelled)()) {
    t->was_cancelled = true;
    return 1;  // aborts with CURLE_ABORTED_BY_CALLBACK
  }
  return 0;
}

// Transfers of fibers (core/fiber.h), all on one thread with libcurl's multi
// interface: a fiber's request holds no thread while it is in flight. Off a
// fiber SendHttp performs on the calling thread as before. The callbacks
// (OnBody, OnHeader, OnProgress) then run on this thread while the fiber is
// suspended, so what they write is the fiber's again once it is woken.
// Never destroyed: requests may be in flight during exit.
class CurlLoop {
 public:
  static CurlLoop& Get() {
    static CurlLoop* loop = new CurlLoop();
    return *loop;
  }
  // Performs `c` on the loop's thread and suspends the calling fiber until
  // it is done.
  CURLcode Perform(CURL* c) {
    CURLcode rc = CURLE_OK;
    fiber::Suspend([&](const fiber::Waker& w) {
      {
        runloom::MutexLock l(&mu_);
        added_.push_back({c, &rc, w});
      }
      curl_multi_wakeup(multi_);
    });
    return rc;
  }

 private:
  struct Pending {
    CURL* easy;
    CURLcode* rc;
    fiber::Waker waker;
  };
  CurlLoop() : multi_(curl_multi_init()) {
    if (multi_ == nullptr) {
      std::fprintf(stderr, "runloom: fatal: curl_multi_init failed\n");
      std::abort();
    }
    std::thread([this] { Loop(); }).detach();
  }
  void Loop() {
    std::map<CURL*, Pending> running;  // this thread's
    std::vector<fiber::Waker> done;
    while (true) {
      std::vector<Pending> added;
      {
        runloom::MutexLock l(&mu_);
        added.swap(added_);
      }
      for (Pending& p : added) {
        const CURLMcode m = curl_multi_add_handle(multi_, p.easy);
        if (m != CURLM_OK) {
          *p.rc = CURLE_OUT_OF_MEMORY;  // reported as unavailable, nothing sent
          done.push_back(p.waker);
          continue;
        }
        running.emplace(p.easy, std::move(p));
      }
      int still = 0;
      curl_multi_perform(multi_, &still);
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
        if (msg->msg != CURLMSG_DONE) continue;
        CURL* easy = msg->easy_handle;
        const CURLcode rc = msg->data.result;
        curl_multi_remove_handle(multi_, easy);
        auto it = running.find(easy);
        if (it == running.end()) continue;
        *it->second.rc = rc;
        done.push_back(it->second.waker);
        running.erase(it);
      }
      for (const fiber::Waker& w : done) w.Wake();
      done.clear();
      // A cancel is seen by OnProgress, which runs from curl_multi_perform:
      // wake at least every kCancelPoll while transfers run.
      curl_multi_poll(multi_, nullptr, 0, running.empty() ? 60'000 : kCancelPollMs, nullptr);
    }
  }

  static constexpr int kCancelPollMs = 50;
  CURLM* const multi_;
  runloom::Mutex mu_;
  std::vector<Pending> added_ ABSL_GUARDED_BY(mu_);
};

long Millis(absl::Duration d) {                            // NOLINT(runtime/int): curl takes long
  return static_cast<long>(absl::ToInt64Milliseconds(d));  // NOLINT(runtime/int)
}

}  // namespace

std::optional<std::string_view> HttpResponse::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return std::string_view(v);
  }
  return std::nullopt;
}

bool WasSent(const absl::Status& s) { return s.GetPayload(kHttpSentPayload).has_value(); }

std::string RedactUrl(std::string_view url) {
  std::string_view u = url.substr(0, url.find_first_of("?#"));
  const size_t scheme = u.find("://");
  const size_t host_start = scheme == std::string_view::npos ? 0 : scheme + 3;
  const size_t at = u.find('@', host_start);
  const size_t slash = u.find('/', host_start);
  if (at != std::string_view::npos && (slash == std::string_view::npos || at < slash)) {
    std::string out(u.substr(0, host_start));
    out.append(u.substr(at + 1));
    return out;
  }
  return std::string(u);
}

absl::StatusOr<HttpResponse> SendHttp(const HttpRequest& request) {
  absl::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  const std::string where = absl::StrCat(request.method, " ", RedactUrl(request.url));
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  CURL* c = curl.get();

  HttpResponse response;
  Transfer transfer{.response = &response,
                    .max_bytes = request.max_response_bytes,
                    .cancelled = &request.cancelled,
                    .on_data = &request.on_data};
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  for (const auto& [name, value] : request.headers) {
    curl_slist* next = curl_slist_append(headers.get(), absl::StrCat(name, ": ", value).c_str());
    if (next == nullptr) return absl::ResourceExhaustedError("curl_slist_append failed");
    (void)headers.release();
    headers.reset(next);
  }
  curl_slist* next = curl_slist_append(headers.get(), "Expect:");
  if (next == nullptr) return absl::ResourceExhaustedError("curl_slist_append failed");
  (void)headers.release();
  headers.reset(next);

  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, Millis(request.connect_timeout));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, Millis(request.total_timeout));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &transfer);
  if (request.cancelled) {
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &OnProgress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &transfer);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  }
  const bool sends_body = !request.body.empty() || request.method == "POST" ||
                          request.method == "PUT" || request.method == "PATCH";
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET" || sends_body) {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  if (sends_body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  }

  const absl::Time start = absl::Now();
  const CURLcode rc = fiber::OnFiber() ? CurlLoop::Get().Perform(c) : curl_easy_perform(c);
  response.elapsed = absl::Now() - start;
  if (rc != CURLE_OK) {
    const std::string detail = error[0] != '\0' ? error : curl_easy_strerror(rc);
    // Whether the server may have the request: curl counts the bytes of
    // the request it wrote to the connection (0 when it never connected).
    long request_bytes = 0;  // NOLINT(runtime/int): curl's type
    curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &request_bytes);
    absl::Status failed;
    switch (rc) {
      case CURLE_OPERATION_TIMEDOUT:
        failed = absl::DeadlineExceededError(absl::StrCat(where, ": timed out: ", detail));
        break;
      case CURLE_URL_MALFORMAT:
      case CURLE_UNSUPPORTED_PROTOCOL:
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": not a usable http(s) URL: ", detail));
      case CURLE_ABORTED_BY_CALLBACK:
        failed = absl::CancelledError(absl::StrCat(where, ": cancelled"));
        break;
      case CURLE_WRITE_ERROR:
        if (transfer.too_large) {
          failed = absl::ResourceExhaustedError(absl::StrCat(
              where, ": response body is larger than ", request.max_response_bytes, " bytes"));
          break;
        }
        [[fallthrough]];
      default:
        failed = absl::UnavailableError(absl::StrCat(where, ": ", detail));
    }
    if (request_bytes > 0) failed.SetPayload(kHttpSentPayload, absl::Cord("1"));
    return failed;
  }
  long status = 0;  // NOLINT(runtime/int): curl's type
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace runloom::net
