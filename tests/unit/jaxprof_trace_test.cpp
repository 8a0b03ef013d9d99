// The reader of what jax.profiler.trace writes (tracers/jaxprof/jaxprof_trace.h): the real
// trace of a jitted loop on an H200 (tests/fixtures/jaxprof/real/, jax 0.11.2; counts taken
// from the file with python3), the same JSON not gzip'd, and hostile files: a gzip stream
// cut short, a gzip bomb, bytes that are not UTF-8, endless strings, a link, a file past
// its bound, events before their process is named.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>
#include <set>
#include <sstream>

#include "test_support.h"
#include "tracers/jaxprof/jaxprof_trace.h"

using namespace cudatrace;
using testsupport::temp_dir;
namespace fs = std::filesystem;

namespace {

const fs::path kReal = fs::path(CUDATRACE_FIXTURES) / "jaxprof" / "real" / "jit_loop" / "perfetto_trace.json.gz";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path write(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

// gzip's format (header, deflate, CRC and length), as zlib writes it for gzip(1).
// `pad` bytes of spaces follow `text`, deflated a slice at a time (a bomb is never whole here).
std::string gzip(const std::string& text, uint64_t pad = 0, const std::string& tail = "") {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out, spaces(size_t(1) << 20, ' ');
  char buf[1 << 16];
  const auto feed = [&](const std::string& in, int flush) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = uInt(in.size());
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof buf;
      deflate(&z, flush);
      out.append(buf, sizeof buf - z.avail_out);
    } while (z.avail_out == 0 || z.avail_in > 0);
  };
  feed(text, Z_NO_FLUSH);
  for (uint64_t left = pad; left > 0; left -= std::min<uint64_t>(left, spaces.size()))
    feed(spaces.substr(0, size_t(std::min<uint64_t>(left, spaces.size()))), Z_NO_FLUSH);
  feed(tail, Z_FINISH);
  deflateEnd(&z);
  return out;
}

std::string gunzip_real() {
  gzFile f = gzopen(kReal.c_str(), "rb");
  std::string text;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  gzclose(f);
  return text;
}

struct Converted {
  JaxTraceReading r;
  std::vector<Event> events;
  size_t count(const std::string& layer, const std::string& name = "") const {
    size_t n = 0;
    for (const auto& e : events) n += e.layer == layer && (name.empty() || e.name == name);
    return n;
  }
};

// The bounds of a run whose bound is 1 GiB.
JaxTraceLimits run_limits() { return JaxTraceLimits::for_run(uint64_t(1) << 30); }

Converted convert(const fs::path& file, const JaxTraceLimits& limits = run_limits(), int64_t base_ns = 0) {
  Converted c;
  const std::function<void(const Event&)> sink = [&c](const Event& e) { c.events.push_back(e); };
  c.r = read_jax_trace(file, 4242, JaxTraceClock{base_ns}, {{0, "0000:9A:00.0"}}, limits, sink);
  return c;
}

// What the real trace holds, read either way (gzip'd or not).
void expect_real_counts(const Converted& c) {
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_FALSE(c.r.clock_known);
  EXPECT_EQ(c.r.display_time_unit, "ns");
  EXPECT_EQ(c.r.kernels, 40);
  EXPECT_EQ(c.r.driver_calls, 20);
  EXPECT_EQ(c.events.size(), 60u);
  EXPECT_EQ(c.count(layer::kGpuActivity, "gemm_fusion_dot"), 20u);
  EXPECT_EQ(c.count(layer::kGpuActivity, "loop_add_fusion"), 20u);
  EXPECT_EQ(c.count(layer::kDriver, "cuLaunchHostFunc"), 20u);
  EXPECT_EQ(c.r.launches_named_by_kernel, 40);  // the launches XLA named after their kernels
  EXPECT_EQ(c.r.host_spans, 568);
  EXPECT_EQ(c.r.metadata_events, 10);
  EXPECT_EQ(c.r.other_events, 1);  // the {} XLA ends traceEvents with
  EXPECT_EQ(c.r.gpu_other_events + c.r.other_process_events + c.r.events_of_unnamed_process, 0);
  EXPECT_EQ(c.r.events_malformed + c.r.events_too_large + c.r.kernels_without_dims, 0);
  std::set<uint64_t> corr;
  int64_t kernel_ns = 0;
  for (const auto& e : c.events) {
    EXPECT_EQ(e.pid, 4242);
    if (e.layer == layer::kDriver) {
      EXPECT_EQ(e.tid, 976482582);  // XLA's id of the python3 thread, not an OS thread id
      EXPECT_FALSE(e.device);
      continue;
    }
    ASSERT_EQ(e.device, 0);
    EXPECT_EQ(e.device_id, "0000:9a:00.0");
    EXPECT_EQ(e.args.at("stream"), 14);
    EXPECT_EQ(e.args.at("device"), 0);
    EXPECT_EQ(e.args.at("kernel"), e.name);
    const bool gemm = e.name == "gemm_fusion_dot";
    EXPECT_EQ(e.args.at("grid"), nlohmann::json::array({gemm ? 128 : 512, 1, 1})) << e.name;
    EXPECT_EQ(e.args.at("block"), nlohmann::json::array({gemm ? 64 : 128, 1, 1})) << e.name;
    ASSERT_TRUE(e.corr);
    corr.insert(*e.corr);
    kernel_ns += e.dur.value_or(0);
  }
  EXPECT_EQ(corr.size(), 40u);
  EXPECT_EQ(*corr.begin(), 1u);
  EXPECT_EQ(*corr.rbegin(), 40u);
  EXPECT_EQ(kernel_ns, 146'620);  // the file's 40 durations summed, to the ns
}

}  // namespace

TEST(JaxprofTrace, RealTraceOfAJittedLoopOnAnH200) {
  const Converted c = convert(kReal, run_limits(), 1'000'000'000);
  expect_real_counts(c);
  EXPECT_TRUE(c.r.gzip);
  EXPECT_EQ(c.r.file_bytes, fs::file_size(kReal));
  EXPECT_EQ(c.r.file_bytes_read, c.r.file_bytes);
  EXPECT_EQ(c.r.text_bytes_read, 112'396u);
  // The first driver call (XLA writes the host's events first): ts 16202.434 us and dur
  // 14.963 us from the trace's start, on the caller's base; the first kernel at 15987.094 us.
  ASSERT_EQ(c.events.front().layer, layer::kDriver);
  EXPECT_EQ(c.events.front().ts, 1'000'000'000 + 16'202'434);
  EXPECT_EQ(c.events.front().dur, 14'963);
  const Event& kernel = c.events[20];
  ASSERT_EQ(kernel.layer, layer::kGpuActivity);
  EXPECT_EQ(kernel.ts, 1'000'000'000 + 15'987'094);
  EXPECT_EQ(kernel.dur, 5'535);
  EXPECT_EQ(kernel.corr, 1u);
}

TEST(JaxprofTrace, PlainJsonIsReadAsTheGzipdTraceIs) {
  const fs::path dir = temp_dir("jaxprof-plain");
  const Converted c = convert(write(dir / "perfetto_trace.json", gunzip_real()));
  expect_real_counts(c);
  EXPECT_FALSE(c.r.gzip);
  EXPECT_EQ(c.r.file_bytes_read, 112'396u);
}

TEST(JaxprofTrace, ACutTraceKeepsWhatItHadAndIsCut) {
  const fs::path dir = temp_dir("jaxprof-cut");
  const std::string gz = slurp(kReal);
  const Converted c = convert(write(dir / "cut.json.gz", gz.substr(0, gz.size() / 2)));
  EXPECT_FALSE(c.r.complete);
  EXPECT_NE(c.r.cut.find("gzip stream ends before its end"), std::string::npos) << c.r.cut;
  EXPECT_GT(c.r.kernels + c.r.driver_calls, 0);
  EXPECT_LT(c.r.kernels + c.r.driver_calls, 60);
  EXPECT_EQ(size_t(c.r.kernels + c.r.driver_calls), c.events.size());
  // The same text cut in its middle (inside a string), not gzip'd: the host's first 12
  // driver calls are before the cut, the GPU's kernels all after it.
  const std::string text = gunzip_real();
  const Converted p = convert(write(dir / "cut.json", text.substr(0, text.size() / 2)));
  EXPECT_FALSE(p.r.complete);
  EXPECT_NE(p.r.cut.find("a string without its end"), std::string::npos) << p.r.cut;
  EXPECT_EQ(p.r.driver_calls, 12);
  EXPECT_EQ(p.r.kernels, 0);
  // Cut between two events: the input ends inside traceEvents.
  const Converted q = convert(write(dir / "cut2.json", text.substr(0, text.find("}, {\"ph\"", text.size() / 2) + 1)));
  EXPECT_FALSE(q.r.complete);
  EXPECT_NE(q.r.cut.find("the input ends"), std::string::npos) << q.r.cut;
  EXPECT_EQ(q.r.driver_calls, 12);
  // A corrupt stream is said so (its first deflate block made of type 3, which deflate does
  // not have: the block follows the header and its file name), and an empty file is cut too.
  std::string bad = gz;
  ASSERT_EQ(uint8_t(gz[3]), 0x08);  // FNAME: a name ended by a 0 byte follows the 10-byte header
  bad[gz.find('\0', 10) + 1] = char(0xFF);
  const Converted b = convert(write(dir / "bad.json.gz", bad));
  EXPECT_FALSE(b.r.complete);
  EXPECT_NE(b.r.cut.find("corrupt"), std::string::npos) << b.r.cut;
  EXPECT_FALSE(convert(write(dir / "empty.json.gz", "")).r.complete);
}

TEST(JaxprofTrace, AGzipBombIsRefusedAtTheTextBoundWithAReason) {
  const fs::path dir = temp_dir("jaxprof-bomb");
  // One named GPU and one kernel, then 256 MiB of white space that deflates 1000 to 1.
  const std::string head =
      "{\"traceEvents\": [{\"ph\": \"M\", \"pid\": 1, \"name\": \"process_name\", \"args\": {\"name\": "
      "\"/device:GPU:0\"}},\n{\"ph\": \"X\", \"pid\": 1, \"tid\": 7, \"ts\": 1.5, \"dur\": 1, \"name\": \"k\", "
      "\"args\": {\"correlation_id\": \"9\", \"kernel_details\": \"grid:1,2,3 block:4,5,6\"}}";
  const fs::path bomb = write(dir / "bomb.json.gz", gzip(head, uint64_t(256) << 20, "]}"));
  JaxTraceLimits limits = run_limits();
  limits.max_text_bytes = uint64_t(4) << 20;
  const Converted c = convert(bomb, limits);
  EXPECT_FALSE(c.r.complete);
  EXPECT_TRUE(c.r.text_over_bound);
  EXPECT_FALSE(c.r.file_over_bound);
  EXPECT_NE(c.r.cut.find("gzip bomb"), std::string::npos) << c.r.cut;
  EXPECT_EQ(c.r.text_bytes_read, limits.max_text_bytes);
  EXPECT_GT(c.r.file_bytes_unread(), 0u);  // what lies past the bound was never inflated
  ASSERT_EQ(c.events.size(), 1u);          // what came before the bound is kept
  EXPECT_EQ(c.events[0].args.at("grid"), nlohmann::json::array({1, 2, 3}));
  EXPECT_EQ(c.events[0].corr, 9u);
  EXPECT_EQ(jax_trace_loss(c.r)["traces_refused"], 1) << "the refusal is a loss the verdict names";
  // Under a bound it fits, the same file is read whole: the refusal is the bound's.
  limits.max_text_bytes = uint64_t(300) << 20;
  EXPECT_TRUE(convert(bomb, limits).r.complete);
}

TEST(JaxprofTrace, HostileStringsAreKeptAsBytesAndBounded) {
  const fs::path dir = temp_dir("jaxprof-strings");
  std::string text = gunzip_real();
  // A kernel's name with a lone Latin-1 byte and a byte UTF-8 never has; a driver call's
  // name 100 KiB long; a kernel whose grid does not fit a dim3.
  // (the GPU's record of a kernel: its args have hlo_module, a host launch's do not)
  const size_t kernel = text.find("\"loop_add_fusion\", \"args\": {\"context_id\": \"$$1\", \"correlation_id\": \"2\", \"hlo_module\"");
  ASSERT_NE(kernel, std::string::npos);
  text.replace(kernel + 1, 4, std::string("lo\xE9\xFF", 4));
  const size_t call = text.find("cuLaunchHostFunc");
  text.replace(call, 16, "cuLaunchHostFunc" + std::string(100 << 10, 'x'));
  const size_t grid = text.find("grid:128,1,1");
  text.replace(grid, 12, "grid:99999999999,1,1");
  const Converted c = convert(write(dir / "t.json.gz", gzip(text)));
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_EQ(c.r.invalid_utf8_bytes, 2);
  EXPECT_EQ(c.count(layer::kGpuActivity, "lo\\xE9\\xFF_add_fusion"), 1u);
  EXPECT_EQ(c.r.strings_cut, 1);
  EXPECT_EQ(c.count(layer::kDriver, "cuLaunchHostFunc" + std::string((64 << 10) - 16, 'x')), 1u);
  EXPECT_EQ(c.r.kernels_without_dims, 1);  // converted, without the grid it could not hold
  EXPECT_EQ(c.r.kernels, 40);
  size_t without = 0;
  for (const auto& e : c.events) without += e.layer == layer::kGpuActivity && !e.args.contains("grid");
  EXPECT_EQ(without, 1u);
  // An event past its bound of values is counted, not read; the next one is.
  JaxTraceLimits limits = run_limits();
  limits.max_event_values = 10;
  const Converted small = convert(write(dir / "t2.json.gz", gzip(text)), limits);
  // The kernels (19 values), their launches (11), the 20 executions with 7 args (14).
  EXPECT_EQ(small.r.events_too_large, 40 + 40 + 20);
  EXPECT_EQ(small.r.driver_calls, 20);
}

TEST(JaxprofTrace, ALinkIsNotReadAndAFilePastItsBoundIsCut) {
  const fs::path dir = temp_dir("jaxprof-files");
  fs::create_symlink(kReal, dir / "link.json.gz");
  const Converted link = convert(dir / "link.json.gz");
  EXPECT_FALSE(link.r.unreadable.empty());
  EXPECT_TRUE(link.events.empty());
  JaxTraceLimits limits = run_limits();
  limits.max_file_bytes = 4096;
  const Converted gz = convert(kReal, limits);
  EXPECT_FALSE(gz.r.complete);
  EXPECT_TRUE(gz.r.file_over_bound);
  EXPECT_EQ(gz.r.file_bytes_read, 4096u);
  EXPECT_EQ(gz.r.file_bytes_unread(), fs::file_size(kReal) - 4096);
  const nlohmann::json loss = jax_trace_loss(gz.r);
  EXPECT_EQ(loss["traces_cut"], 1);
  EXPECT_EQ(loss["over_bound_bytes"], fs::file_size(kReal) - 4096) << "a bound reached is a named loss";
  const nlohmann::json whole = jax_trace_loss(convert(kReal).r);
  for (const auto& [counter, n] : whole.items())
    EXPECT_EQ(n, 0) << counter << ": the whole trace, read within the run's bounds, lost nothing";
  const Converted plain = convert(write(dir / "plain.json", gunzip_real()), limits);
  EXPECT_FALSE(plain.r.complete);
  EXPECT_TRUE(plain.r.file_over_bound);
  EXPECT_NE(plain.r.cut.find("bound of 4096"), std::string::npos) << plain.r.cut;
  // A plain file's text is the file: past the text bound, it is the file that is cut.
  JaxTraceLimits text_only = run_limits();
  text_only.max_text_bytes = 4096;
  const Converted text = convert(dir / "plain.json", text_only);
  EXPECT_FALSE(text.r.complete);
  EXPECT_TRUE(text.r.file_over_bound);
  EXPECT_FALSE(text.r.text_over_bound);
  EXPECT_EQ(text.r.text_bytes_read, 4096u);
}

TEST(JaxprofTrace, EventsBeforeTheirProcessIsNamedAreCountedNotGuessed) {
  const fs::path dir = temp_dir("jaxprof-order");
  const std::string text =
      "{\"traceEvents\": [\n"
      "{\"ph\": \"X\", \"pid\": 1, \"tid\": 7, \"ts\": 1, \"name\": \"k\", \"args\": {\"kernel_details\": \"grid:1,1,1 block:1,1,1\"}},\n"
      "{\"ph\": \"M\", \"pid\": 1, \"name\": \"process_name\", \"args\": {\"name\": \"/device:GPU:3\"}},\n"
      "{\"ph\": \"M\", \"pid\": 2, \"name\": \"process_name\", \"args\": {\"name\": \"/device:TPU:0\"}},\n"
      "{\"ph\": \"X\", \"pid\": 1, \"tid\": 7, \"ts\": 2, \"name\": \"k\", \"args\": {\"kernel_details\": \"grid:1,1,1 block:1,1,1\"}},\n"
      "{\"ph\": \"X\", \"pid\": 1, \"tid\": 7, \"ts\": 3, \"name\": \"MemcpyH2D\", \"args\": {\"memcpy_details\": \"size:4\"}},\n"
      "{\"ph\": \"X\", \"pid\": 2, \"tid\": 1, \"ts\": 4, \"name\": \"t\"}, 7]}";
  const Converted c = convert(write(dir / "t.json", text));
  ASSERT_TRUE(c.r.complete) << c.r.cut;
  EXPECT_EQ(c.r.events_of_unnamed_process, 1);
  EXPECT_EQ(c.r.kernels, 1);
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].device, 3);
  EXPECT_EQ(c.events[0].ts, 2000);
  EXPECT_EQ(c.r.gpu_other_events, 1);
  EXPECT_EQ(c.r.other_process_events, 1);
  EXPECT_EQ(c.r.other_processes.at("/device:TPU:0"), 1);
  EXPECT_EQ(c.r.events_malformed, 1);  // the 7
}

// The byte bounds follow the run's bound (itself from the free space under --out), not a
// constant: the file may take all of it, its streamed text 64 times that, saturating.
TEST(JaxprofTrace, ByteBoundsScaleWithTheRunsBound) {
  const JaxTraceLimits small = JaxTraceLimits::for_run(uint64_t(1) << 20);
  EXPECT_EQ(small.max_file_bytes, uint64_t(1) << 20);
  EXPECT_EQ(small.max_text_bytes, uint64_t(64) << 20);
  const JaxTraceLimits big = JaxTraceLimits::for_run(uint64_t(2) << 40);
  EXPECT_EQ(big.max_file_bytes, uint64_t(2) << 40);
  EXPECT_EQ(big.max_text_bytes, uint64_t(128) << 40);
  EXPECT_EQ(JaxTraceLimits::for_run(UINT64_MAX / 2).max_text_bytes, UINT64_MAX);
}
