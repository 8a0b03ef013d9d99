#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "common/event_store.h"
#include "common/event_io.h"
#include "test_support.h"
#include "tracers/strace/nvidia_ioctl.h"
#include "tracers/strace/strace_parser.h"
#include "tracers/strace/strace_tracer.h"

using namespace cudatrace;

namespace {

std::vector<Event> parse_lines(const std::vector<std::string>& lines, StraceStats* stats = nullptr,
                               int64_t offset = 0) {
  std::vector<Event> events;
  StraceParser p(offset, [&](Event&& e) { events.push_back(std::move(e)); });
  for (const auto& l : lines) p.feed(l);
  p.finish();
  if (stats) *stats = p.stats();
  return events;
}

std::vector<Event> parse_fixture(const std::string& name, StraceStats* stats = nullptr) {
  std::ifstream f(std::string(CUDATRACE_FIXTURES) + "/strace/" + name);
  EXPECT_TRUE(f) << name;
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(f, line)) lines.push_back(line);
  return parse_lines(lines, stats);
}

}  // namespace

TEST(StraceParser, CompleteCallWithResultDurationAndErrno) {
  StraceStats st;
  auto ev = parse_lines({"7003  1795320939.545452778 access(\"/etc/ld.so.preload\", 0x4) = -1 ENOENT (No such file "
                         "or directory) <0.000029347>",
                         "7003  1795320939.544691051 brk(NULL)    = 0x564308e15000 <0.000080553>"},
                        &st, 1795320000000000000);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].name, "access");
  EXPECT_EQ(ev[0].ts, 939545452778);  // realtime minus the offset
  EXPECT_EQ(ev[0].dur, 29347);
  EXPECT_EQ(ev[0].ret, -1);
  EXPECT_EQ(ev[0].args["errno"], "ENOENT");
  EXPECT_EQ(ev[0].tid, 7003);
  EXPECT_EQ(ev[0].pid, 7003);
  EXPECT_EQ(ev[1].ret, 0x564308e15000);  // padded result, hex
  EXPECT_EQ(st.unparsed, 0);
}

TEST(StraceParser, UnfinishedAndResumedAcrossThreadsBecomeOneCallEach) {
  StraceStats st;
  auto ev = parse_fixture("two-threads.txt", &st);
  EXPECT_EQ(st.unparsed, 0);
  EXPECT_EQ(st.orphan_resumed, 0);
  EXPECT_EQ(st.unfinished_at_end, 0);
  size_t sleeps = 0, getpids = 0;
  for (const auto& e : ev) {
    if (e.name == "exit" || e.name == "exit_group") {
      EXPECT_FALSE(e.ret.has_value()) << e.name << " = ? returns nothing";
    }
    if (e.name == "clock_nanosleep") {
      ++sleeps;
      EXPECT_TRUE(e.dur.has_value()) << "a resumed call has its duration";
      EXPECT_EQ(e.ret, 0);
    }
    if (e.name == "getpid") {
      ++getpids;
      EXPECT_EQ(e.tid, 7004);
      EXPECT_EQ(e.pid, 7003) << "a thread (clone3 with CLONE_THREAD) belongs to its process";
    }
  }
  EXPECT_EQ(sleeps, 6u);  // 3 per thread in two-threads.c
  EXPECT_EQ(getpids, 3u);
  // Each thread's calls go out in the order it made them: its timestamps never go backwards.
  std::map<int64_t, int64_t> last;
  for (const auto& e : ev) {
    EXPECT_LE(last[e.tid], e.ts) << e.name << " of thread " << e.tid;
    last[e.tid] = e.ts;
  }
}

TEST(StraceParser, ResumedArgumentsAreJoined) {
  auto ev = parse_lines({"10 1.000000001 ioctl(3</dev/nvidiactl>, 0xc020462a <unfinished ...>",
                         "11 1.000000002 getpid() = 11 <0.000000100>",
                         "10 1.000000500 <... ioctl resumed>, 0x7ffd0000) = 0 <0.000000499>"});
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].name, "ioctl");
  EXPECT_EQ(ev[0].dur, 499);
  EXPECT_EQ(ev[0].args["path"], "/dev/nvidiactl");
  EXPECT_EQ(ev[0].args["request"], "NV_ESC_RM_CONTROL");
  EXPECT_EQ(ev[0].args["request_code"], "0xc020462a");
}

TEST(StraceParser, SignalsForksAndCrashes) {
  StraceStats st;
  auto ev = parse_fixture("signal-fork-crash.txt", &st);
  EXPECT_EQ(st.unparsed, 0);
  EXPECT_EQ(st.signals, 2);  // SIGUSR1, SIGSEGV
  bool child_seen = false;
  for (const auto& e : ev)
    if (e.tid == 7033) {
      child_seen = true;
      EXPECT_EQ(e.pid, 7033) << "a fork is a process of its own";
    }
  EXPECT_TRUE(child_seen);
}

TEST(StraceParser, GarbageIsCountedNotDropped) {
  StraceStats st;
  std::string long_line = "12 2.000000000 write(1, \"" + std::string(100000, 'x') + "\", 100000) = 100000 <0.000001000>";
  auto ev = parse_lines({"strace: Process 12 attached", "12 not-a-time foo() = 0", "12 2.5 weird line", long_line}, &st);
  EXPECT_EQ(st.unparsed, 3);
  EXPECT_EQ(st.unparsed_examples.size(), 3u);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].ret, 100000);
  EXPECT_LT(ev[0].args["text"].get<std::string>().size(), 200u) << "argument text is bounded";
}

TEST(StraceParser, AThreadWaitsForTheCloneThatMadeItThenJoinsItsProcess) {
  // strace may print a new thread's calls before the clone that made it returns.
  StraceStats st;
  auto ev = parse_lines({"20 1.000000001 clone3({flags=0x50f00, ...} <unfinished ...>",
                         "21 1.000000005 getpid() = 20 <0.000000100>",
                         "20 1.000000002 <... clone3 resumed>, 88) = 21 <0.000000010>"},
                        &st);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].name, "clone3");
  EXPECT_EQ(ev[1].name, "getpid");
  EXPECT_EQ(ev[1].pid, 20) << "the thread's process, once its clone returned";
  EXPECT_EQ(st.process_unknown, 0);
  // With no room to wait, the thread goes out as a process of its own, and is counted.
  std::vector<Event> out;
  StraceParser tight(0, [&](Event&& e) { out.push_back(std::move(e)); }, 0);
  tight.feed("20 1.000000001 getpid() = 20 <0.000000100>");
  tight.feed("21 1.000000005 getpid() = 20 <0.000000100>");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].pid, 21);
  EXPECT_EQ(tight.stats().process_unknown, 1);
}

TEST(StraceParser, ResumedWithoutStartIsAnOrphan) {
  StraceStats st;
  auto ev = parse_lines({"10 1.0 <... read resumed>\"\", 1) = 0 <0.000000001>"}, &st);
  EXPECT_TRUE(ev.empty());
  EXPECT_EQ(st.orphan_resumed, 1);
}

TEST(NvidiaIoctl, NamesByDeviceAndCode) {
  EXPECT_EQ(nvidia_ioctl_name("/dev/nvidiactl", 0xc020462a), "NV_ESC_RM_CONTROL");
  EXPECT_EQ(nvidia_ioctl_name("/dev/nvidia0", 0xc030462b), "NV_ESC_RM_ALLOC");
  EXPECT_EQ(nvidia_ioctl_name("/dev/nvidiactl", 0xc00446c9), "NV_ESC_REGISTER_FD");
  EXPECT_EQ(nvidia_ioctl_name("/dev/nvidia-uvm", 0x30000001), "UVM_INITIALIZE");
  EXPECT_EQ(nvidia_ioctl_name("/dev/nvidia-uvm", 37), "UVM_REGISTER_GPU");
  EXPECT_EQ(nvidia_ioctl_name("/dev/nvidia-uvm", 0x4242), "") << "unknown codes stay numbers";
  EXPECT_EQ(nvidia_ioctl_name("/dev/null", 0xc020462a), "") << "type 'F' on another device is not NVIDIA's";
}

// The real errors workload, captured without a GPU: converted into events.jsonl whole.
TEST(StraceConvert, WorkloadCaptureBecomesSyscallEvents) {
  auto dir = testsupport::temp_dir("strace");
  TracerReport r = convert_strace_output(std::string(CUDATRACE_FIXTURES) + "/strace/errors.static.nogpu.txt",
                                         dir / cudatrace::kEventsFile, 0);
  EXPECT_TRUE(r.error.empty());
  EXPECT_EQ(r.layers, std::vector<std::string>{"syscall"});
  EXPECT_EQ(r.loss["unparsed_lines"], 0);
  EventStream s = read_events(dir / cudatrace::kEventsFile);
  ASSERT_EQ(s.events.size(), 288u);
  EXPECT_EQ(s.events.front().name, "execve");
  EXPECT_EQ(r.notes["syscalls"], 288);
}

TEST(StraceConvert, MissingOutputIsATracerError) {
  auto dir = testsupport::temp_dir("strace");
  TracerReport r = convert_strace_output(dir / "nothing.txt", dir / cudatrace::kEventsFile, 0);
  EXPECT_NE(r.error.find("strace wrote no output"), std::string::npos);
}

TEST(StraceTracer, CommandFollowsThreadsAndStampsNanoseconds) {
  auto args = StraceTracer::strace_args("/usr/bin/strace", "/tmp/x/strace.txt");
  for (const char* needed : {"-f", "-y", "--absolute-timestamps=unix,ns", "--syscall-times=ns", "--"})
    EXPECT_NE(std::find(args.begin(), args.end(), needed), args.end()) << needed;
  EXPECT_EQ(args.back(), "--");
}

// Captured on the H100 (driver 580.159.04): the streams workload, shared cudart.
TEST(StraceParser, H100StreamsCaptureDecodesNvidiaIoctls) {
  StraceStats st;
  auto ev = parse_fixture("streams.shared.h100.txt", &st);
  EXPECT_EQ(st.unparsed, 0);
  EXPECT_EQ(st.orphan_resumed, 0);
  std::map<std::string, int> requests;
  std::set<int64_t> pids, tids;
  for (const auto& e : ev) {
    pids.insert(e.pid);
    tids.insert(e.tid);
    if (e.name == "ioctl" && e.args.value("nvidia", false)) ++requests[e.args.value("request", "?")];
  }
  EXPECT_EQ(pids.size(), 1u) << "all threads belong to the workload's one process";
  EXPECT_GE(tids.size(), 3u) << "main + 2 host threads (and the driver's own)";
  EXPECT_GT(requests["NV_ESC_RM_CONTROL"], 0);
  EXPECT_GT(requests["NV_ESC_RM_ALLOC"], 0);
  EXPECT_GT(requests["UVM_INITIALIZE"], 0);
}
