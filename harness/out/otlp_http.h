#pragma once
// Sends TracesData lines (otlp_export.h) to an OpenTelemetry Collector, or anything that
// speaks OTLP/HTTP, as JSON (`Content-Type: application/json`, POST to <endpoint>/v1/traces).
//
// libcurl does the HTTP, loaded when the first request is made (libcurl.so.4, or its GnuTLS
// or NSS build), so the
// harness still starts on a GPU host that has no libcurl: only --otlp-endpoint needs it,
// and says so in one line. Retries follow the OTLP/HTTP specification: 429, 502, 503 and
// 504 are retried, after the server's Retry-After when it gives one (at most 30 s), else
// after 0.25, 0.5, 1, 2 s; anything else is an error at once. No redirect is followed and
// only http and https are spoken.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/out/otlp_export.h"

namespace cudatrace {

struct OtlpHttpOptions {
  int attempts = 5;
  long connect_timeout_ms = 5000;
  long request_timeout_ms = 30000;
  // One body's whole send, its retries and their waits (a collector answering 429 with a
  // long Retry-After) included: past it the send gives up, and so does a Ctrl-C at once.
  long total_timeout_ms = 60000;
};

class OtlpHttpSender {
 public:
  // ENDPOINT is the base (http://HOST:4318) or the full traces URL (…/v1/traces).
  // Throws std::invalid_argument with a one-line reason for a URL it will not use.
  explicit OtlpHttpSender(const std::string& endpoint, OtlpHttpOptions options = {});
  ~OtlpHttpSender();
  OtlpHttpSender(const OtlpHttpSender&) = delete;
  OtlpHttpSender& operator=(const OtlpHttpSender&) = delete;

  // One request (with its retries). Returns "" when the collector took it, else the reason
  // in one line ("cannot reach …: Couldn't connect to server", "HTTP 400: …").
  std::string send(const std::string& body);

  const std::string& url() const { return url_; }
  size_t requests() const { return requests_; }  // HTTP requests made, retries included
  size_t retries() const { return retries_; }

 private:
  struct Curl;
  std::string url_;
  OtlpHttpOptions options_;
  std::unique_ptr<Curl> curl_;
  size_t requests_ = 0, retries_ = 0;
};

// The traces URL for a base endpoint: "http://h:4318" -> "http://h:4318/v1/traces"; a URL
// that already ends in /v1/traces is kept. Throws std::invalid_argument otherwise.
std::string otlp_traces_url(const std::string& endpoint);

// `harness --otlp-endpoint`: each run folder is sent as its run finishes. After the first
// failure it prints one line, sends nothing more and leaves the results on disk as they are.
class OtlpRunSender {
 public:
  explicit OtlpRunSender(const std::string& endpoint);  // throws std::invalid_argument
  // A run as run_one() holds it when it has written run.json (see otlp_of_run).
  void send_run(const std::string& folder_name, const nlohmann::json& run, const nlohmann::json& manifest,
                const std::vector<Event>& events);
  nlohmann::json summary() const;  // for summary.json
  std::string console_line() const;
  bool failed() const { return !error_.empty(); }

 private:
  OtlpHttpSender sender_;
  OtlpStats sent_;
  std::string error_;
};

}  // namespace cudatrace
