// The torchprof method's reader of Chrome traces (tracers/torchprof/torchprof_trace.h), on
// traces written here in Kineto's format (tests/fixtures/torchprof/, README there) and on
// hostile ones: a link, a hard link, a file past its bound, bytes that are not UTF-8, a
// trace cut short, strings and tokens without end, nesting without end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "test_support.h"
#include "tracers/torchprof/torchprof_json.h"
#include "tracers/torchprof/torchprof_trace.h"

using namespace cudatrace;
using testsupport::temp_dir;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kBase = 1790857026000000000;  // the fixtures' baseTimeNanoseconds
constexpr int64_t kToMonotonic = 1'000'000'000'000;  // monotonic = relative ts + this
const TraceClock kClock{kBase - kToMonotonic, kBase};

fs::path fixture(const std::string& name) { return fs::path(CUDATRACE_FIXTURES) / "torchprof" / name; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

struct Converted {
  TraceReading r;
  std::vector<Event> events;
  const Event* find(const std::string& layer, const std::string& name) const {
    for (const auto& e : events)
      if (e.layer == layer && e.name == name) return &e;
    return nullptr;
  }
  size_t count(const std::string& layer) const {
    size_t n = 0;
    for (const auto& e : events) n += e.layer == layer;
    return n;
  }
};

Converted convert(const fs::path& file, int64_t pid, const TraceLimits& limits = {},
                  const std::map<int64_t, std::string>& bus_ids = {}, const TraceClock& clock = kClock) {
  Converted c;
  const std::function<void(const Event&)> sink = [&c](const Event& e) { c.events.push_back(e); };
  c.r = read_torch_trace(file, pid, clock, bus_ids, limits, sink);
  return c;
}

// A trace in Kineto's layout with `n` launches, each followed by its kernel.
std::string many_launches(int n) {
  std::string s = "{\"schemaVersion\": 1, \"baseTimeNanoseconds\": " + std::to_string(kBase) + ",\n\"traceEvents\": [\n";
  for (int i = 0; i < n; ++i) {
    const std::string corr = std::to_string(100 + i), ts = std::to_string(10 * i + 1);
    s += "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 9, \"tid\": 9, \"ts\": " +
         ts + ".000, \"dur\": 1.000, \"args\": {\"cbid\": 211, \"correlation\": " + corr + "}},\n";
    s += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": " + ts +
         ".500, \"dur\": 1.000, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": " + corr +
         ", \"grid\": [1, 1, 1], \"block\": [32, 1, 1]}},\n";
  }
  return s + "{\"ph\": \"i\", \"s\": \"g\", \"name\": \"Record Window End\", \"pid\": \"\", \"tid\": \"\", \"ts\": 1}\n]}";
}

}  // namespace

TEST(TorchprofTrace, ConvertsCallsKernelsAndCopiesOfATrainingStep) {
  const Converted c = convert(fixture("train_step.json"), 4242, {}, {{0, "0000:18:00.0"}});
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_TRUE(c.r.base_in_file);
  EXPECT_EQ(c.r.runtime_calls, 5);
  EXPECT_EQ(c.r.driver_calls, 1);
  EXPECT_EQ(c.r.kernels, 2);
  EXPECT_EQ(c.r.memcpys, 1);
  EXPECT_EQ(c.r.memsets, 1);
  EXPECT_EQ(c.events.size(), 10u);
  EXPECT_EQ(c.r.other_events, 7);  // a CPU op, a stream sync, two flows, two names, the window's end
  EXPECT_EQ(c.r.other_categories.at("cpu_op"), 1);

  const Event* launch = c.find(layer::kRuntime, "cudaLaunchKernel");
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->ts, kToMonotonic + 100250);  // 100.250 us, to the ns
  EXPECT_EQ(launch->dur, 5125);
  EXPECT_EQ(launch->pid, 4242);
  EXPECT_EQ(launch->tid, 4250);
  EXPECT_EQ(launch->corr, 11u);
  EXPECT_EQ(launch->device, 0);  // from its kernel, joined by correlation id
  EXPECT_EQ(launch->device_id, "0000:18:00.0");
  EXPECT_EQ(launch->args["grid"], nlohmann::json({256, 1, 1}));
  EXPECT_EQ(launch->args["block"], nlohmann::json({128, 1, 1}));
  EXPECT_FALSE(launch->ret.has_value());  // Kineto keeps no return code

  // The kernel came before its driver call in the file: the call is joined all the same.
  const Event* driver = c.find(layer::kDriver, "cuLaunchKernel");
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(driver->device, 0);
  EXPECT_EQ(driver->args["grid"], nlohmann::json({64, 1, 1}));

  const Event* copy = c.find(layer::kRuntime, "cudaMemcpyAsync");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->args["bytes"], 4096);
  EXPECT_EQ(copy->args["kind"], "HtoD");
  const Event* set = c.find(layer::kRuntime, "cudaMemsetAsync");
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->args["bytes"], 1024);
  const Event* sync = c.find(layer::kRuntime, "cudaStreamSynchronize");
  ASSERT_NE(sync, nullptr);
  EXPECT_FALSE(sync->device.has_value());  // no GPU record says where it ran
  // Kineto names runtime calls from its own table, without CUPTI's version suffix, and
  // "INVALID" past its end (torch 2.11: cbid 461): named from CUPTI's, the suffix dropped.
  const Event* unnamed = c.find(layer::kRuntime, "cudaStreamGetCaptureInfo");
  ASSERT_NE(unnamed, nullptr);
  EXPECT_EQ(unnamed->tid, 4251);
  EXPECT_EQ(unnamed->args["cbid"], 461);
  EXPECT_EQ(c.r.runtime_named_from_cbid, 1);

  ASSERT_EQ(c.count(layer::kGpuActivity), 2u);
  const Event* kernel = c.find(layer::kGpuActivity, "triton_poi_fused_mul_0");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->pid, 4242);  // the file's process; its "pid" 0 was the device
  EXPECT_EQ(kernel->device, 0);
  EXPECT_EQ(kernel->device_id, "0000:18:00.0");
  EXPECT_EQ(kernel->ts, kToMonotonic + 205000);
  EXPECT_EQ(kernel->dur, 1500);
  EXPECT_EQ(kernel->args["kernel"], "triton_poi_fused_mul_0");
  EXPECT_EQ(kernel->args["stream"], 7);
  EXPECT_EQ(kernel->corr, 12u);
  const Event* memcpy = c.find(kGpuMemoryLayer, "Memcpy HtoD (Pageable -> Device)");
  ASSERT_NE(memcpy, nullptr);
  EXPECT_EQ(memcpy->args["bytes"], 4096);
  EXPECT_EQ(memcpy->device, 0);
  EXPECT_EQ(c.r.calls_given_device, 4);
}

TEST(TorchprofTrace, GraphReplayIsOneCallAndEveryKernelOfIt) {
  const Converted c = convert(fixture("graph_replay_2024.json"), 5151);
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_EQ(c.r.runtime_calls, 2);
  EXPECT_EQ(c.r.kernels, 3);
  const Event* replay = c.find(layer::kRuntime, "cudaGraphLaunch");
  ASSERT_NE(replay, nullptr);
  EXPECT_EQ(replay->device, 1);
  EXPECT_FALSE(replay->args.contains("grid"));  // three kernels: no one grid is the call's
  for (const auto& e : c.events) {
    if (e.layer == layer::kGpuActivity) {
      EXPECT_EQ(e.corr, 21u);
    }
  }
  // Kineto of mid-2024 wrote its base after the events, and its log lines into the trace.
  EXPECT_FALSE(c.r.base_in_file);
  EXPECT_FALSE(c.r.base_disagrees);
  EXPECT_EQ(replay->ts, kToMonotonic + 1000000);
  EXPECT_EQ(c.r.kineto_log_lines, 1);
  ASSERT_EQ(c.r.kineto_log_examples.size(), 1u);
  EXPECT_NE(c.r.kineto_log_examples[0].find("Exceeded max GPU buffer"), std::string::npos);
}

TEST(TorchprofTrace, ABaseAfterTheEventsThatIsNotTheOneUsedIsSaid) {
  const TraceClock other{kClock.realtime_minus_monotonic_ns, kBase - int64_t(7'889'238) * 1'000'000'000};
  const Converted c = convert(fixture("graph_replay_2024.json"), 5151, {}, {}, other);
  EXPECT_TRUE(c.r.base_disagrees);
  EXPECT_EQ(kineto_base_for(kBase + 12345), kBase);
  EXPECT_EQ(kineto_base_for(kBase - 1), other.base_ns);
}

TEST(TorchprofTrace, OlderKinetoStampsUnixTimeItself) {
  const Converted c = convert(fixture("absolute_2023.json"), 6161);
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  const Event* launch = c.find(layer::kRuntime, "cudaLaunchKernel");
  ASSERT_NE(launch, nullptr);
  // 1790857026123456.789 us is read to the ns, not through a double.
  EXPECT_EQ(launch->ts, 1790857026123456789 - kClock.realtime_minus_monotonic_ns);
  EXPECT_EQ(launch->dur, 4321);
  const Event* kernel = c.find(layer::kGpuActivity, "old_style_kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->dur, 2000);  // an integer "dur" is microseconds too
  EXPECT_EQ(launch->device, 0);
}

TEST(TorchprofTrace, ALinkOrASecondHardLinkIsNotRead) {
  const fs::path dir = temp_dir("torchprof-links");
  const fs::path secret = write(dir / "root-only.json", slurp(fixture("train_step.json")));
  fs::create_symlink(secret, dir / "torchprof.1.json");
  Converted c = convert(dir / "torchprof.1.json", 1);
  EXPECT_NE(c.r.unreadable.find("link"), std::string::npos) << c.r.unreadable;
  EXPECT_TRUE(c.events.empty());
  EXPECT_FALSE(c.r.complete);
  fs::create_hard_link(secret, dir / "torchprof.2.json");
  c = convert(dir / "torchprof.2.json", 2);
  EXPECT_NE(c.r.unreadable.find("hard links"), std::string::npos) << c.r.unreadable;
  EXPECT_TRUE(c.events.empty());
}

TEST(TorchprofTrace, AFilePastItsBoundIsCutThereAndSaysSo) {
  const fs::path dir = temp_dir("torchprof-bound");
  const std::string text = many_launches(2000);
  const fs::path file = write(dir / "big.json", text);
  TraceLimits limits;
  limits.max_bytes = text.size() / 2;
  const Converted c = convert(file, 9, limits);
  EXPECT_FALSE(c.r.complete);
  EXPECT_TRUE(c.r.over_bound);
  EXPECT_EQ(c.r.bytes_read, limits.max_bytes);
  EXPECT_EQ(c.r.file_bytes, text.size());
  EXPECT_NE(c.r.cut.find("bound"), std::string::npos) << c.r.cut;
  // What came before the bound is kept, every call of it, each joined or not.
  EXPECT_GT(c.r.runtime_calls, 900);
  EXPECT_LT(c.r.runtime_calls, 1100);
  EXPECT_EQ(c.count(layer::kRuntime), size_t(c.r.runtime_calls));
}

TEST(TorchprofTrace, BytesThatAreNotUtf8AreKeptAsHexAndTheRestIsRead) {
  const fs::path dir = temp_dir("torchprof-utf8");
  std::string text = slurp(fixture("train_step.json"));
  const size_t at = text.find("triton_poi_fused_mul_0");
  text.replace(at, 6, std::string("tri\xE9\xFF", 5) + "n");  // a lone Latin-1 byte, a byte UTF-8 never has
  text.replace(text.find("Memset (Device)"), 6, std::string("Mem\xE2\x82", 5) + "t");  // a sequence cut short
  const Converted c = convert(write(dir / "t.json", text), 4242);
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_EQ(c.r.invalid_utf8_bytes, 4);
  EXPECT_NE(c.find(layer::kGpuActivity, "tri\\xE9\\xFFn_poi_fused_mul_0"), nullptr);
  EXPECT_NE(c.find(kGpuMemoryLayer, "Mem\\xE2\\x82t (Device)"), nullptr);
  EXPECT_EQ(c.events.size(), 10u);
}

TEST(TorchprofTrace, ATruncatedTraceKeepsWhatItHadAndIsCut) {
  const fs::path dir = temp_dir("torchprof-cut");
  const std::string text = slurp(fixture("train_step.json"));
  const fs::path file = write(dir / "t.json", text.substr(0, text.find("cudaMemsetAsync") + 40));
  const Converted c = convert(file, 4242);
  EXPECT_FALSE(c.r.complete);
  EXPECT_FALSE(c.r.over_bound);
  EXPECT_FALSE(c.r.cut.empty());
  EXPECT_EQ(c.r.runtime_calls, 2);  // the launch and the copy; the set was cut in half
  EXPECT_EQ(c.r.kernels, 2);
  EXPECT_EQ(c.events.size(), 6u);
  // An empty file, and one that is not JSON at all, are cut too: never a clean zero.
  EXPECT_FALSE(convert(write(dir / "empty.json", ""), 1).r.complete);
  EXPECT_FALSE(convert(write(dir / "text.json", "Segmentation fault\n"), 1).r.complete);
}

TEST(TorchprofTrace, EndlessStringsAndTokensAreBounded) {
  const fs::path dir = temp_dir("torchprof-long");
  std::string text = many_launches(3);
  text.replace(text.find("\"k\""), 3, "\"" + std::string(100 << 10, 'k') + "\\u00e9\"");
  Converted c = convert(write(dir / "string.json", text), 9);
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_EQ(c.r.strings_cut, 1);
  ASSERT_EQ(c.count(layer::kGpuActivity), 3u);
  EXPECT_NE(c.find(layer::kGpuActivity, std::string(size_t(64) << 10, 'k')), nullptr);
  // A string of nothing but escapes is cut as well, between two of them.
  std::string escapes;
  for (int i = 0; i < (200 << 10); ++i) escapes += "\\n";
  std::string escaped = many_launches(3);
  escaped.replace(escaped.find("\"k\""), 3, "\"k" + escapes + "\"");
  c = convert(write(dir / "escapes.json", escaped), 9);
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_EQ(c.r.strings_cut, 1);
  ASSERT_EQ(c.count(layer::kGpuActivity), 3u);
  std::string number = many_launches(3);
  number.replace(number.find("1.000"), 5, std::string(10 << 10, '1'));
  c = convert(write(dir / "number.json", number), 9);
  EXPECT_FALSE(c.r.complete);
  EXPECT_NE(c.r.cut.find("token"), std::string::npos) << c.r.cut;
}

TEST(TorchprofTrace, EndlessNestingIsNotBuiltAndTheNextEventIsRead) {
  const fs::path dir = temp_dir("torchprof-deep");
  std::string text = many_launches(2);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  text.replace(text.find("\"cbid\": 211"), 11, "\"cbid\": 211, \"deep\": " + deep);
  const Converted c = convert(write(dir / "deep.json", text), 9);
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_EQ(c.r.events_too_large, 1);
  EXPECT_EQ(c.r.runtime_calls, 1);
  EXPECT_EQ(c.r.kernels, 2);
}

TEST(TorchprofTrace, ACallPastTheJoinWindowIsWrittenWithoutADeviceNotLost) {
  const fs::path dir = temp_dir("torchprof-window");
  std::string text = "{\"traceEvents\": [\n";
  for (int i = 0; i < 3; ++i)
    text += "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"tid\": 1, \"ts\": " +
            std::to_string(i + 1) + ".0, \"dur\": 0.5, \"args\": {\"correlation\": " + std::to_string(i + 1) + "}},\n";
  for (int i = 0; i < 3; ++i)
    text += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 2, \"ts\": " + std::to_string(i + 5) +
            ".0, \"dur\": 0.5, \"args\": {\"device\": 2, \"correlation\": " + std::to_string(i + 1) + "}}" +
            (i < 2 ? ",\n" : "\n");
  text += "]}";
  TraceLimits limits;
  limits.join_window = 2;
  const Converted c = convert(write(dir / "w.json", text), 3, limits);
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  ASSERT_EQ(c.count(layer::kRuntime), 3u);
  EXPECT_EQ(c.r.calls_given_device, 2);
  for (const auto& e : c.events) {
    if (e.layer == layer::kRuntime) {
      EXPECT_EQ(e.device.has_value(), e.corr != 1u) << *e.corr;
    }
  }
}

// The reader's own JSON (tracers/torchprof/torchprof_json.h) reads what nlohmann read: the
// escapes, surrogate pairs, numbers as JSON types them; a value of another type is no value.
TEST(TorchprofTrace, EscapesAndNumbersAreReadAsJsonHasThem) {
  const fs::path dir = temp_dir("torchprof-json");
  std::string text = many_launches(2);
  text.replace(text.find("\"k\""), 3, "\"k\\\"\\\\\\u00e9\\ud83d\\ude00\\n\"");
  text.replace(text.find("\"cbid\": 211"), 11, "\"cbid\": 211.0");
  text.replace(text.find("\"ts\": 1.500"), 11, "\"ts\": 1.5e0");
  text.replace(text.find("[32, 1, 1]"), 10, "[32, 1, 1, 1]");
  text.replace(text.find("\"grid\": [1, 1, 1]", text.find("\"grid\": [1, 1, 1]") + 1), 17,
               "\"grid\": [4294967296, 1, 1]");
  const Converted c = convert(write(dir / "j.json", text), 9);
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_EQ(c.r.kernels, 2);
  const Event* k = c.find(layer::kGpuActivity, "k\"\\\xC3\xA9\xF0\x9F\x98\x80\n");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->ts, kToMonotonic + 1500);
  EXPECT_FALSE(k->args.contains("block"));  // four dims are no block
  const Event* launch = c.find(layer::kRuntime, "cudaLaunchKernel");
  ASSERT_NE(launch, nullptr);
  EXPECT_FALSE(launch->args.contains("cbid"));  // 211.0 is no integer
  // A grid past uint32_t (only a hostile file has one) is kept as it was written.
  size_t wide = 0;
  for (const auto& e : c.events)
    wide += e.layer == layer::kGpuActivity && e.args.value("grid", nlohmann::json()) == nlohmann::json({4294967296, 1, 1});
  EXPECT_EQ(wide, 1u);
  // A lone surrogate is not JSON: the trace is cut there, what came before it kept.
  std::string lone = many_launches(3);
  lone.replace(lone.rfind("\"k\""), 3, "\"\\udc00\"");
  const Converted cut = convert(write(dir / "lone.json", lone), 9);
  EXPECT_FALSE(cut.r.complete);
  EXPECT_NE(cut.r.cut.find("surrogate"), std::string::npos) << cut.r.cut;
  EXPECT_EQ(cut.r.kernels, 2);
}

TEST(TorchprofTrace, NestingPastItsBoundIsCut) {
  const fs::path dir = temp_dir("torchprof-deeper");
  std::string text = many_launches(2);
  const size_t depth = kMaxJsonDepth + 1;
  text.replace(text.rfind("\"cbid\": 211"), 11, "\"cbid\": 211, \"deep\": " + std::string(depth, '[') + std::string(depth, ']'));
  const Converted c = convert(write(dir / "deeper.json", text), 9);
  EXPECT_FALSE(c.r.complete);
  EXPECT_NE(c.r.cut.find("nesting"), std::string::npos) << c.r.cut;
  EXPECT_EQ(c.r.kernels, 1);
}

// What an event that is none of ours counts as: its "cat", whether "ph" or "cat" comes first.
TEST(TorchprofTrace, OtherEventsAreCountedByCategory) {
  const fs::path dir = temp_dir("torchprof-other");
  const std::string text =
      "{\"traceEvents\": [{\"ph\": \"f\", \"id\": 1, \"cat\": \"ac2g\", \"name\": \"ac2g\", \"ts\": 1},\n"
      "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mul\", \"ts\": 2, \"dur\": 1, \"args\": {\"x\": [[1]]}},\n"
      "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"ts\": 3, \"dur\": 1},\n"
      "{\"ph\": \"M\", \"name\": \"process_name\", \"args\": {\"name\": \"python\"}}, 7, [1]],\n"
      "\"WARNING\": [\"Exceeded max GPU buffer count\", \"another\"]}";
  const Converted c = convert(write(dir / "o.json", text), 9);
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_EQ(c.r.other_events, 4);
  EXPECT_EQ(c.r.other_categories.at("ac2g"), 1);
  EXPECT_EQ(c.r.other_categories.at("cpu_op"), 2);
  EXPECT_EQ(c.r.events_malformed, 2);  // 7 and [1]
  EXPECT_EQ(c.r.kineto_log_lines, 2);
  EXPECT_EQ(c.r.kineto_stopped_tracing, 1);
  // Log lines past one event's bound of values are not read, and are counted so.
  TraceLimits few;
  few.max_event_values = 2;
  const Converted bounded = convert(
      write(dir / "log.json", "{\"traceEvents\": [], \"WARNING\": [\"a\", \"b\", \"c\", \"Exceeded max GPU buffer count\", [1]]}"),
      9, few);
  EXPECT_EQ(bounded.r.kineto_log_lines, 2);
  EXPECT_EQ(bounded.r.kineto_log_lines_unread, 3);
  EXPECT_EQ(bounded.r.kineto_stopped_tracing, 0) << "it was among the unread";
  // A trailing comma, or a file that ends after one, cuts the trace: no event is malformed.
  for (const char* tail : {"]}", ""}) {
    const Converted cut = convert(write(dir / "comma.json", std::string("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": "
                                                                        "\"cpu_op\", \"name\": \"a\", \"ts\": 2},") + tail),
                                  9);
    EXPECT_FALSE(cut.r.complete) << tail;
    EXPECT_EQ(cut.r.events_malformed, 0) << tail;
    fs::remove(dir / "comma.json");
  }
}
