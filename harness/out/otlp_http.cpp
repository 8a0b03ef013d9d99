#include "harness/out/otlp_http.h"

#define CURL_DISABLE_DEPRECATION  // CURLOPT_PROTOCOLS: the fallback for a libcurl older than 7.85
#include <curl/curl.h>
#include <dlfcn.h>

#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "harness/out/otlp_export.h"
#include "harness/run/runner.h"

namespace cudatrace {

namespace {

// The libcurl functions used, looked up once in libcurl.
struct CurlApi {
  CURLcode (*global_init)(long);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  void (*easy_reset)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

// Throws std::runtime_error with what to install when libcurl cannot be loaded.
const CurlApi& curl_api() {
  static const CurlApi api = [] {
    // The same ABI under the names of its TLS flavours (Ubuntu 24.04 may have only GnuTLS's).
    void* lib = nullptr;
    for (const char* name : {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl-nss.so.4"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib)
      throw std::runtime_error(
          "--otlp-endpoint needs libcurl: none of libcurl.so.4, libcurl-gnutls.so.4, libcurl-nss.so.4 could be loaded"
          " (Debian/Ubuntu: apt-get install libcurl4)");
    CurlApi a{};
    auto need = [lib](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) throw std::runtime_error(std::string("libcurl has no ") + name);
    };
    need(a.global_init, "curl_global_init");
    need(a.easy_init, "curl_easy_init");
    need(a.easy_setopt, "curl_easy_setopt");
    need(a.easy_perform, "curl_easy_perform");
    need(a.easy_getinfo, "curl_easy_getinfo");
    need(a.easy_cleanup, "curl_easy_cleanup");
    need(a.easy_reset, "curl_easy_reset");
    need(a.easy_strerror, "curl_easy_strerror");
    need(a.slist_append, "curl_slist_append");
    need(a.slist_free_all, "curl_slist_free_all");
    if (a.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("libcurl did not initialize");
    return a;
  }();
  return api;
}

// What a response said, for the error line: at most this much of its body.
constexpr size_t kMaxResponseText = 300;

struct Response {
  std::string body;
  long retry_after_s = -1;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Response*>(user);
  const size_t bytes = size * n;
  if (r->body.size() < kMaxResponseText) r->body.append(data, std::min(bytes, kMaxResponseText - r->body.size()));
  return bytes;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Response*>(user);
  const std::string line(data, size * n);
  constexpr const char kName[] = "retry-after:";
  if (line.size() > sizeof kName && strncasecmp(line.c_str(), kName, sizeof kName - 1) == 0) {
    char* end = nullptr;
    const long s = std::strtol(line.c_str() + sizeof kName - 1, &end, 10);
    if (end != line.c_str() + sizeof kName - 1 && s >= 0) r->retry_after_s = std::min(s, 30L);  // an HTTP-date: backoff
  }
  return size * n;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t' || static_cast<unsigned char>(c) < 0x20) c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

struct OtlpHttpSender::Curl {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  ~Curl() {
    if (headers) curl_api().slist_free_all(headers);
    if (easy) curl_api().easy_cleanup(easy);
  }
};

std::string otlp_traces_url(const std::string& endpoint) {
  const bool http = endpoint.rfind("http://", 0) == 0, https = endpoint.rfind("https://", 0) == 0;
  if (!http && !https)
    throw std::invalid_argument("--otlp-endpoint wants an http:// or https:// URL (OTLP/HTTP, e.g. http://localhost:4318), got '" +
                                endpoint + "'");
  if (endpoint.size() <= (http ? 7u : 8u) || endpoint.find_first_of(" \t\r\n") != std::string::npos)
    throw std::invalid_argument("--otlp-endpoint: '" + endpoint + "' names no host");
  constexpr const char kPath[] = "/v1/traces";
  if (endpoint.size() >= sizeof kPath - 1 && endpoint.compare(endpoint.size() - (sizeof kPath - 1), sizeof kPath - 1, kPath) == 0)
    return endpoint;
  return (endpoint.back() == '/' ? endpoint.substr(0, endpoint.size() - 1) : endpoint) + kPath;
}

namespace {
int abort_when_interrupted(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) { return g_interrupted ? 1 : 0; }
}  // namespace

OtlpHttpSender::OtlpHttpSender(const std::string& endpoint, OtlpHttpOptions options)
    : url_(otlp_traces_url(endpoint)), options_(options) {}

OtlpHttpSender::~OtlpHttpSender() = default;

std::string OtlpHttpSender::send(const std::string& body) {
  try {
    const CurlApi& api = curl_api();
    if (!curl_) {
      curl_ = std::make_unique<Curl>();
      curl_->easy = api.easy_init();
      if (!curl_->easy) return "libcurl could not make a handle";
      curl_->headers = api.slist_append(nullptr, "Content-Type: application/json");
    }
    using Clock = std::chrono::steady_clock;
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options_.total_timeout_ms);
    const auto left_ms = [&] {
      return long(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    };
    const std::string too_long = "no answer from " + url_ + " within the send's total of " +
                                 std::to_string(options_.total_timeout_ms / 1000) + " s";
    for (int attempt = 1;; ++attempt) {
      if (g_interrupted) return "interrupted (Ctrl-C) while sending to " + url_;
      if (left_ms() <= 0) return too_long + " (" + std::to_string(attempt - 1) + " attempts)";
      Response response;
      CURL* h = curl_->easy;
      api.easy_reset(h);
      api.easy_setopt(h, CURLOPT_URL, url_.c_str());
      if (api.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_UNKNOWN_OPTION)
        api.easy_setopt(h, CURLOPT_PROTOCOLS, long(CURLPROTO_HTTP | CURLPROTO_HTTPS));
      api.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
      api.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
      api.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, std::max(1L, std::min(options_.connect_timeout_ms, left_ms())));
      api.easy_setopt(h, CURLOPT_TIMEOUT_MS, std::max(1L, std::min(options_.request_timeout_ms, left_ms())));
      // A Ctrl-C ends a transfer in flight, not only the next one.
      api.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
      api.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &abort_when_interrupted);
      api.easy_setopt(h, CURLOPT_HTTPHEADER, curl_->headers);
      api.easy_setopt(h, CURLOPT_POST, 1L);
      api.easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
      api.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.size()));
      api.easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
      api.easy_setopt(h, CURLOPT_WRITEDATA, &response);
      api.easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
      api.easy_setopt(h, CURLOPT_HEADERDATA, &response);
      ++requests_;
      const CURLcode rc = api.easy_perform(h);
      if (rc == CURLE_ABORTED_BY_CALLBACK) return "interrupted (Ctrl-C) while sending to " + url_;
      if (rc == CURLE_OPERATION_TIMEDOUT && left_ms() <= 0) return too_long + " (" + std::to_string(attempt) + " attempts)";
      if (rc != CURLE_OK) return "cannot reach " + url_ + ": " + api.easy_strerror(rc);
      long status = 0;
      api.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
      if (status >= 200 && status < 300) return "";
      const bool retryable = status == 429 || status == 502 || status == 503 || status == 504;
      const std::string said = one_line(response.body);
      if (!retryable || attempt >= options_.attempts)
        return "HTTP " + std::to_string(status) + " from " + url_ + (said.empty() ? "" : ": " + said) +
               (retryable ? " (after " + std::to_string(attempt) + " attempts)" : "");
      ++retries_;
      const auto wait = response.retry_after_s >= 0 ? std::chrono::milliseconds(response.retry_after_s * 1000)
                                                     : std::chrono::milliseconds(250 << std::min(attempt - 1, 3));
      if (wait.count() >= left_ms())
        return "HTTP " + std::to_string(status) + " from " + url_ + ": it asked to wait " +
               std::to_string(wait.count() / 1000) + " s, past the send's total of " +
               std::to_string(options_.total_timeout_ms / 1000) + " s (after " + std::to_string(attempt) + " attempts)";
      for (const Clock::time_point until = Clock::now() + wait; Clock::now() < until && !g_interrupted;)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    return e.what();
  }
}

OtlpRunSender::OtlpRunSender(const std::string& endpoint) : sender_(endpoint) {}

void OtlpRunSender::send_run(const std::string& folder_name, const nlohmann::json& run, const nlohmann::json& manifest,
                             const std::vector<Event>& events) {
  if (!error_.empty()) return;
  OtlpStats stats;
  try {
    stats = otlp_of_run(folder_name, run, manifest, events, [&](const std::string& line) {
      if (error_.empty()) error_ = sender_.send(line);
    });
  } catch (const std::exception& e) {
    error_ = folder_name + ": " + e.what();
  }
  if (!error_.empty()) {
    std::fprintf(stderr, "harness: OTLP: %s; results on disk are unaffected; no further run is sent\n", error_.c_str());
    return;
  }
  sent_.add(stats);
}

nlohmann::json OtlpRunSender::summary() const {
  return {{"url", sender_.url()},        {"runs_sent", sent_.runs},        {"spans_sent", sent_.spans},
          {"requests", sender_.requests()}, {"retries", sender_.retries()}, {"error", error_.empty() ? nlohmann::json(nullptr) : nlohmann::json(error_)}};
}

std::string OtlpRunSender::console_line() const {
  if (!error_.empty())
    return "harness: OTLP: NOT SENT from the error above on (" + std::to_string(sent_.runs) + " run(s) sent before it)";
  return "harness: OTLP: sent " + std::to_string(sent_.spans) + " spans of " + std::to_string(sent_.runs) + " run(s) to " +
         sender_.url() + " (" + std::to_string(sender_.requests()) + " requests, " + std::to_string(sender_.retries()) +
         " retried)";
}

}  // namespace cudatrace
