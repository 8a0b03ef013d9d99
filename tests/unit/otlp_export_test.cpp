// The OTLP export's pieces; the whole export is decoded with OpenTelemetry's definitions
// by tests/otlp/check_otlp.py.
#include <gtest/gtest.h>
#include <stdlib.h>

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
