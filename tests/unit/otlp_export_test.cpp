// The OTLP export's pieces; the whole export is decoded with OpenTelemetry's definitions
// by tests/otlp/check_otlp.py.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "harness/cli.h"
#include "harness/out/cuda_error_names.h"
#include "harness/out/otlp_export.h"
#include "harness/out/otlp_http.h"

using namespace cudatrace;
using json = nlohmann::json;

TEST(OtlpExport, ValuesTakeOtlpJsonForms) {
  EXPECT_EQ(otlp_any_value("x"), json({{"stringValue", "x"}}));
  EXPECT_EQ(otlp_any_value(-3), json({{"intValue", "-3"}}));  // 64-bit integers are decimal strings
  EXPECT_EQ(otlp_any_value(json(uint64_t(1) << 63)), json({{"stringValue", "9223372036854775808"}}));
  EXPECT_EQ(otlp_any_value(true), json({{"boolValue", true}}));
  EXPECT_EQ(otlp_any_value(0.5), json({{"doubleValue", 0.5}}));
  EXPECT_EQ(otlp_any_value(json::array({1, "a"})),
            json({{"arrayValue", {{"values", {{{"intValue", "1"}}, {{"stringValue", "a"}}}}}}}));
  EXPECT_EQ(otlp_any_value(json{{"k", 2}}),
            json({{"kvlistValue", {{"values", {{{"key", "k"}, {"value", {{"intValue", "2"}}}}}}}}}));
  EXPECT_EQ(otlp_any_value(nullptr), json::object());
}

TEST(OtlpExport, IdsAreDerivedHexOfTheirSize) {
  const std::string trace = otlp_hex_id("run/a/process/1", 16), span = otlp_hex_id("run/a/span/0", 8);
  EXPECT_EQ(trace.size(), 32u);
  EXPECT_EQ(span.size(), 16u);
  EXPECT_EQ(trace.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(trace, otlp_hex_id("run/a/process/1", 16));  // the same run exports the same ids
  EXPECT_NE(trace, otlp_hex_id("run/a/process/2", 16));
  EXPECT_NE(span, otlp_hex_id("run/a/span/1", 8));
}

TEST(OtlpExport, FailedCallsAreNamedByLayer) {
  EXPECT_EQ(otlp_error_of("runtime", 2, {}), "cudaErrorMemoryAllocation");
  EXPECT_EQ(otlp_error_of("driver", 2, {}), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(otlp_error_of("driver", 34, {}), "CUDA_ERROR_STUB_LIBRARY");
  EXPECT_EQ(otlp_error_of("runtime", 0, {}), "");
  EXPECT_EQ(otlp_error_of("runtime", 123456, {}), "cudaError 123456");  // a newer runtime's code
  EXPECT_EQ(otlp_error_of("syscall", -2, json{{"errno", "ENOENT"}}), "ENOENT");
  EXPECT_EQ(otlp_error_of("syscall", -13, json::object()), "errno 13");
  EXPECT_EQ(otlp_error_of("syscall", 3, json::object()), "");  // a file descriptor, not a failure
  EXPECT_EQ(cuda_runtime_error_name(35), "cudaErrorInsufficientDriver");
  EXPECT_EQ(cuda_driver_error_name(999), "CUDA_ERROR_UNKNOWN");
}

TEST(OtlpExport, EndpointIsAnHttpUrlOfTraces) {
  EXPECT_EQ(otlp_traces_url("http://localhost:4318"), "http://localhost:4318/v1/traces");
  EXPECT_EQ(otlp_traces_url("https://c.example/"), "https://c.example/v1/traces");
  EXPECT_EQ(otlp_traces_url("http://h:1/v1/traces"), "http://h:1/v1/traces");
  EXPECT_THROW(otlp_traces_url("localhost:4318"), std::invalid_argument);
  EXPECT_THROW(otlp_traces_url("file:///etc/passwd"), std::invalid_argument);
  EXPECT_THROW(otlp_traces_url("http://"), std::invalid_argument);
}

TEST(OtlpExport, CliTakesExportAndEndpoint) {
  const std::vector<std::string> w{"errors"}, m{"none"};
  Options o = parse_cli({"--export-otlp", "results/x", "-o", "f.jsonl"}, w, m);
  EXPECT_EQ(o.export_otlp, "results/x");
  EXPECT_EQ(o.otlp_file, "f.jsonl");
  o = parse_cli({"--otlp-endpoint=http://h:4318"}, w, m);
  EXPECT_EQ(o.otlp_endpoint, "http://h:4318");
  EXPECT_THROW(parse_cli({"-o", "f.jsonl"}, w, m), UsageError);                          // -o without an export
  EXPECT_THROW(parse_cli({"--otlp-endpoint", "h:4318"}, w, m), UsageError);              // no scheme
  EXPECT_THROW(parse_cli({"--bench", "--otlp-endpoint", "http://h"}, w, m), UsageError);  // bench keeps no events
}

TEST(OtlpExport, AFolderWithoutRunsIsRefused) {
  EXPECT_THROW(otlp_run_folders("/no/such/folder"), std::runtime_error);
  char empty[] = "/tmp/otlp-empty-XXXXXX";
  ASSERT_NE(mkdtemp(empty), nullptr);
  EXPECT_THROW(otlp_run_folders(empty), std::runtime_error);  // neither run.json nor runs/
  std::filesystem::remove(empty);
}

namespace {

// A collector on 127.0.0.1 that answers every request "429, come back in 30 s".
class BusyCollector {
 public:
  BusyCollector() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd_, 8);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[65536];
        (void)!read(c, buf, sizeof buf);
        ++requests;  // before the answer: the sender may be done, and the test asking, once it has it
        const char reply[] = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\nContent-Length: 0\r\n\r\n";
        (void)!write(c, reply, sizeof reply - 1);
        ::close(c);
      }
    });
  }
  ~BusyCollector() {
    shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::atomic<int> requests{0};

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace

// A collector that keeps answering 429 with a long Retry-After cost 2 minutes per run: the
// send now has a total deadline, and says what happened. (libcurl is loaded when first
// needed; without it the send says so, which this test accepts as a skip.)
TEST(OtlpHttp, ASendGivesUpAtItsTotalDeadline) {
  BusyCollector collector;
  OtlpHttpOptions options;
  options.total_timeout_ms = 1500;
  OtlpHttpSender sender(collector.url(), options);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string error = sender.send("{}");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (error.find("needs libcurl") != std::string::npos) GTEST_SKIP() << error;
  EXPECT_LT(took, 5.0) << error;
  EXPECT_NE(error.find("HTTP 429"), std::string::npos) << error;
  EXPECT_NE(error.find("past the send's total of 1 s"), std::string::npos) << error;
  EXPECT_GE(collector.requests.load(), 1);
}
