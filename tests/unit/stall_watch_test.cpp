// The stall watch (harness/run/stall_watch.h) on fake /proc text and fake series of samples:
// no process runs and no test sleeps. What the runner does with it is in runner_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness/run/stall_watch.h"
#include "test_support.h"

using namespace cudatrace;

namespace {

// A /proc/PID/stat line as the kernel writes it: utime, stime (ticks) and num_threads where
// proc(5) puts them (fields 14, 15 and 20).
std::string stat_line(pid_t pid, const std::string& comm, char state, uint64_t utime, uint64_t stime, int threads) {
  return std::to_string(pid) + " (" + comm + ") " + state + " 1 " + std::to_string(pid) + " " + std::to_string(pid) +
         " 0 -1 4194304 128 0 0 0 " + std::to_string(utime) + " " + std::to_string(stime) + " 0 0 20 0 " +
         std::to_string(threads) + " 0 2072540 2990080 421 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";
}

constexpr int64_t kSec = 1000000000;

ProcessSample proc(pid_t pid, uint64_t ticks, const std::string& name = "prog") {
  ProcessSample p;
  p.pid = pid;
  p.name = name;
  p.state = 'S';
  p.cpu_ticks = ticks;
  p.threads = 1;
  return p;
}

TreeSample at(double t_s, std::vector<ProcessSample> processes, uint64_t output = 0) {
  TreeSample s;
  s.t_ns = int64_t(t_s * 1e9);
  s.processes = std::move(processes);
  s.output_bytes = output;
  return s;
}

StallSettings settings(double stall_timeout_s = 0) {
  StallSettings s;
  s.ticks_per_s = 100;
  s.stall_timeout_s = stall_timeout_s;
  return s;
}

void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST(StallWatchParse, StatLineGivesNameStateCpuAndThreads) {
  const auto f = parse_stat(stat_line(123, "python3", 'S', 700, 42, 4));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name, "python3");
  EXPECT_EQ(f->state, 'S');
  EXPECT_EQ(f->ppid, 1);
  EXPECT_EQ(f->cpu_ticks, 742u);
  EXPECT_EQ(f->threads, 4);
}

TEST(StallWatchParse, NameMayHoldParenthesesSpacesAndAnyByte) {
  // The name ends at the last ')': a name like "a) R (b" must not shift the fields.
  const auto f = parse_stat(stat_line(7, "a) R 1 (b", 'D', 3, 4, 2));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name, "a) R 1 (b");
  EXPECT_EQ(f->state, 'D');
  EXPECT_EQ(f->cpu_ticks, 7u);
  const auto g = parse_stat(stat_line(8, "caf\xe9\nx", 'S', 0, 0, 1));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->name, "caf\xe9\nx");
}

TEST(StallWatchParse, WhatIsNotAStatLineIsRefused) {
  EXPECT_FALSE(parse_stat(""));
  EXPECT_FALSE(parse_stat("123 python3 S 1 2 3"));  // no parentheses
  EXPECT_FALSE(parse_stat("123 (python3) S 1 2 3 0 -1 4194304 128 0 0 0 7"));  // cut short
  std::string bad = stat_line(1, "x", 'S', 1, 1, 1);
  bad.replace(bad.find(" 1 1 0 0 20"), 4, " z 1");  // utime not a number
  EXPECT_FALSE(parse_stat(bad)) << bad;
  EXPECT_FALSE(parse_stat(stat_line(1, "x", 'S', 1, 1, 1).replace(6, 1, "SS")));  // the state is one letter
}

TEST(StallWatchParse, WaitChannelIsASymbolOrNothing) {
  EXPECT_EQ(parse_wchan("futex_wait_queue\n"), "futex_wait_queue");
  EXPECT_EQ(parse_wchan("hrtimer_nanosleep"), "hrtimer_nanosleep");
  EXPECT_EQ(parse_wchan("0"), "") << "running, or not permitted";
  EXPECT_EQ(parse_wchan(""), "");
  EXPECT_EQ(parse_wchan("two words"), "");
  EXPECT_EQ(parse_wchan("x\xff"), "");
  EXPECT_EQ(parse_wchan(std::string(300, 'a')), "");
}

// read_process_sample on a folder shaped like /proc.
TEST(StallWatchRead, ProcessAndThreadsFromAFakeProc) {
  const auto root = testsupport::temp_dir("stall-proc");
  write(root / "123/stat", stat_line(123, "python3", 'S', 10, 5, 3));
  write(root / "123/task/123/stat", stat_line(123, "python3", 'S', 10, 5, 3));
  write(root / "123/task/123/wchan", "do_epoll_wait");
  write(root / "123/task/124/stat", stat_line(124, "pt_nccl", 'S', 0, 0, 3));
  write(root / "123/task/124/wchan", "futex_wait_queue");
  write(root / "123/task/125/stat", stat_line(125, "cuda-EvtHandlr", 'R', 0, 0, 3));
  write(root / "123/task/125/wchan", "0");
  std::filesystem::create_directories(root / "123/task/not-a-tid");

  const auto bare = read_process_sample(123, false, root.string());
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->cpu_ticks, 15u);
  EXPECT_TRUE(bare->thread_states.empty()) << "threads only when asked";

  const auto p = read_process_sample(123, true, root.string());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->name, "python3");
  ASSERT_EQ(p->thread_states.size(), 3u);
  EXPECT_EQ(p->thread_states[0].wchan, "do_epoll_wait");
  EXPECT_EQ(p->thread_states[1].state, 'S');
  EXPECT_EQ(p->thread_states[1].wchan, "futex_wait_queue");
  EXPECT_EQ(p->thread_states[2].state, 'R');
  EXPECT_EQ(p->thread_states[2].wchan, "");

  EXPECT_FALSE(read_process_sample(999, true, root.string())) << "gone";
  const TreeSample tree = read_tree_sample({999, 123}, 5 * kSec, 77, false, root.string());
  ASSERT_EQ(tree.processes.size(), 1u);
  EXPECT_EQ(tree.processes[0].pid, 123);
  EXPECT_EQ(tree.output_bytes, 77u);
}

TEST(StallWatchRead, ReadsAreBounded) {
  const auto root = testsupport::temp_dir("stall-proc");
  // A stat "file" of 1 MiB: only its first kStatBytes are read, which hold no whole line.
  write(root / "5/stat", stat_line(5, std::string(1 << 20, 'x'), 'S', 1, 1, 1));
  EXPECT_FALSE(read_process_sample(5, false, root.string()));
  // More threads than the bound: the rest are counted, not read.
  write(root / "6/stat", stat_line(6, "many", 'S', 0, 0, kThreadsReadPerProcess + 3));
  for (int t = 0; t < kThreadsReadPerProcess + 3; ++t)
    write(root / ("6/task/" + std::to_string(1000 + t) + "/stat"), stat_line(1000 + t, "many", 'S', 0, 0, 1));
  const auto p = read_process_sample(6, true, root.string());
  ASSERT_TRUE(p);
  EXPECT_EQ(int(p->thread_states.size()), kThreadsReadPerProcess);
  EXPECT_EQ(p->threads_not_read, 3);
}

// ---- the judgement over a series of samples ----

TEST(StallWatchJudge, ABlockedProcessStallsFromItsLastProgress) {
  StallWatch w(settings(2));
  for (int i = 0; i <= 8; ++i) {  // every 0.5 s, the same CPU time
    w.add(at(0.5 * i, {proc(10, 42)}));
    EXPECT_EQ(w.stall_timeout_reached(), 0.5 * i >= 2) << "at " << 0.5 * i << " s";
  }
  EXPECT_EQ(w.progress_ns(), 0);
  EXPECT_DOUBLE_EQ(w.idle_s(), 4.0);
}

TEST(StallWatchJudge, AProcessUsingCpuIsNeverStalled) {
  StallWatch w(settings(2));
  for (int i = 0; i <= 20; ++i) {
    w.add(at(0.5 * i, {proc(10, uint64_t(50 * i))}));  // a whole CPU
    EXPECT_FALSE(w.stall_timeout_reached()) << "at " << 0.5 * i << " s";
  }
  EXPECT_DOUBLE_EQ(w.idle_s(), 0.0);
}

TEST(StallWatchJudge, OutputIsProgress) {
  StallWatch w(settings(2));
  for (int i = 0; i <= 10; ++i) w.add(at(0.5 * i, {proc(10, 0)}, i <= 3 ? 100 * i : 300));
  EXPECT_EQ(w.progress_ns(), int64_t(1.5 * kSec)) << "the last write was seen at 1.5 s";
  EXPECT_TRUE(w.stall_timeout_reached()) << "idle from 1.5 s to 5 s";
}

TEST(StallWatchJudge, AProcessStartingOrEndingIsProgress) {
  StallWatch w(settings(2));
  w.add(at(0, {proc(10, 5)}));
  w.add(at(0.5, {proc(10, 5)}));
  w.add(at(1.0, {proc(10, 5), proc(11, 0)}));  // a child started
  w.add(at(1.5, {proc(10, 5), proc(11, 0)}));
  EXPECT_EQ(w.progress_ns(), 1 * kSec);
  w.add(at(2.0, {proc(10, 5)}));  // and ended
  w.add(at(3.5, {proc(10, 5)}));
  EXPECT_EQ(w.progress_ns(), 2 * kSec);
  EXPECT_FALSE(w.stall_timeout_reached());
  w.add(at(4.0, {proc(10, 5)}));
  EXPECT_TRUE(w.stall_timeout_reached());
}

// A deadlocked program keeps a housekeeping thread (a watchdog waking every few seconds):
// a small share of one CPU is not progress; a steady 5% is.
TEST(StallWatchJudge, ATrickleOfCpuIsNotProgressButASteadyShareIs) {
  StallWatch watchdog(settings(20));
  uint64_t ticks = 0;
  for (int i = 0; i <= 60; ++i) {  // 30 s: 2 ticks (20 ms) every 3 s
    if (i % 6 == 5) ticks += 2;
    watchdog.add(at(0.5 * i, {proc(10, ticks)}));
  }
  EXPECT_TRUE(watchdog.stall_timeout_reached()) << "idle for " << watchdog.idle_s() << " s";
  EXPECT_EQ(watchdog.progress_ns(), 0);

  StallWatch slow(settings(20));
  for (int i = 0; i <= 60; ++i) slow.add(at(0.5 * i, {proc(10, uint64_t(2.5 * i))}));  // 5% of a CPU
  EXPECT_FALSE(slow.stall_timeout_reached());
  EXPECT_LT(slow.idle_s(), 2.0);
}

TEST(StallWatchJudge, OneBusyProcessAmongIdleOnesIsProgress) {
  StallWatch w(settings(2));
  for (int i = 0; i <= 10; ++i) w.add(at(0.5 * i, {proc(10, 0), proc(11, 0), proc(12, uint64_t(50 * i))}));
  EXPECT_FALSE(w.stall_timeout_reached());
}

TEST(StallWatchJudge, OffMeansNeverReached) {
  StallWatch w(settings(0));
  for (int i = 0; i <= 100; ++i) w.add(at(0.5 * i, {proc(10, 0)}));
  EXPECT_FALSE(w.stall_timeout_reached());
  EXPECT_DOUBLE_EQ(w.idle_s(), 50.0) << "the judgement is still there for a timeout's reason";
}

// Two hours of samples: the memory kept is bounded, and "since when" still found.
TEST(StallWatchJudge, ALongRunKeepsFewSamplesAndStillKnowsSinceWhen) {
  StallWatch w(settings(0));
  uint64_t ticks = 0;
  for (int i = 0; i <= 14400; ++i) {
    if (i * 0.5 < 1000) ticks += 50;  // busy for 1000 s, then blocked
    w.add(at(0.5 * i, {proc(10, ticks)}));
  }
  EXPECT_LE(w.kept(), 129u);
  EXPECT_EQ(w.progress_ns(), int64_t(999.5 * 1e9)) << "the last sample where its CPU time grew";
  const auto cpu = w.cpu_over(10, 30);
  ASSERT_TRUE(cpu);
  EXPECT_DOUBLE_EQ(cpu->cpu_s, 0);
  EXPECT_NEAR(cpu->window_s, 30, 1);
}

TEST(StallWatchJudge, CpuOverAWindowAndForAYoungProcess) {
  StallWatch w(settings(0));
  for (int i = 0; i <= 80; ++i) {  // 40 s; process 11 from 35 s on
    std::vector<ProcessSample> ps{proc(10, uint64_t(10 * i))};  // a fifth of a CPU
    if (i >= 70) ps.push_back(proc(11, uint64_t(50 * (i - 70))));
    w.add(at(0.5 * i, ps));
  }
  const auto old = w.cpu_over(10, 30);
  ASSERT_TRUE(old);
  EXPECT_NEAR(old->window_s, 30, 0.6);
  EXPECT_NEAR(old->cpu_s, 6, 0.2);
  const auto young = w.cpu_over(11, 30);
  ASSERT_TRUE(young);
  EXPECT_DOUBLE_EQ(young->window_s, 5) << "only as long as it was seen";
  EXPECT_DOUBLE_EQ(young->cpu_s, 5);
  EXPECT_FALSE(w.cpu_over(12, 30)) << "never seen";
}

// ---- in words ----

TEST(StallWatchWords, WhatEachProcessWaitsIn) {
  StallWatch w(settings(0));
  ProcessSample p = proc(123, 700, "python3");
  for (int i = 0; i <= 60; ++i) w.add(at(0.5 * i, {p}));
  p.threads = 4;
  p.thread_states = {{123, 'S', "futex_wait_queue"}, {124, 'S', "futex_wait_queue"},
                     {125, 'S', "futex_wait_queue"}, {126, 'S', "futex_wait_queue"}};
  EXPECT_EQ(describe_process_line(p, w.cpu_over(123, 30)),
            "pid 123 python3: 4 threads sleeping in futex_wait_queue, 0 s CPU in the last 30 s");
  p.thread_states = {{123, 'R', ""}, {124, 'S', "futex_wait_queue"}, {125, 'D', "nvidia_ioctl"},
                     {126, 'S', "futex_wait_queue"}};
  p.threads_not_read = 2;
  EXPECT_EQ(describe_process_line(p, StallWatch::CpuOver{29.8, 30}),
            "pid 123 python3: 2 threads sleeping in futex_wait_queue, 1 thread in uninterruptible wait in nvidia_ioctl, "
            "1 thread running, 2 more threads not read, 30 s CPU in the last 30 s");
  p.thread_states.clear();
  EXPECT_EQ(describe_process_line(p, std::nullopt), "pid 123 python3: sleeping, 4 threads, CPU not sampled over a window yet");
}

TEST(StallWatchWords, NamesAreEscapedOnOneLine) {
  ProcessSample p = proc(9, 0, "caf\xe9\nrm -rf");
  const std::string line = describe_process_line(p, StallWatch::CpuOver{0, 2});
  EXPECT_EQ(line, "pid 9 caf\\xE9\\x0Arm -rf: sleeping, 1 thread, 0 s CPU in the last 2 s");
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(StallWatchWords, VerdictStalledBusyOrNeither) {
  StallWatch stalled(settings(0));
  for (int i = 0; i <= 20; ++i) stalled.add(at(0.5 * i, {proc(10, i < 4 ? uint64_t(50 * i) : 150)}));
  StallVerdict v = judge_stall(stalled, at(10, {proc(10, 150)}), 8.5);
  EXPECT_TRUE(v.stalled);
  EXPECT_FALSE(v.busy);
  EXPECT_EQ(v.summary, "stalled since 1.5 s into the run: no CPU time and no output for its last 8.5 s");
  EXPECT_EQ(v.json["stalled"], true);
  EXPECT_EQ(v.json["processes"][0]["cpu_s"], 0.0);
  ASSERT_EQ(v.processes.size(), 1u);
  EXPECT_EQ(v.processes[0], "pid 10 prog: sleeping, 1 thread, 0 s CPU in the last 8.5 s");

  StallWatch spinning(settings(0));
  for (int i = 0; i <= 20; ++i) spinning.add(at(0.5 * i, {proc(10, uint64_t(50 * i))}));
  v = judge_stall(spinning, at(10, {proc(10, 1000)}), 10);
  EXPECT_FALSE(v.stalled);
  EXPECT_TRUE(v.busy);
  EXPECT_EQ(v.summary.rfind("busy to the end", 0), 0u) << v.summary;

  StallWatch young(settings(0));
  young.add(at(0, {proc(10, 0)}));
  young.add(at(0.5, {proc(10, 0)}));
  v = judge_stall(young, at(0.5, {proc(10, 0)}), 0.5);
  EXPECT_FALSE(v.stalled) << "half a second is no stall";
  EXPECT_FALSE(v.busy);
  EXPECT_EQ(v.summary, "no stall seen: progress 0.5 s before the end");
}

TEST(StallWatchWords, ManyProcessesAreCountedNotAllListed) {
  std::vector<std::string> lines;
  for (int i = 0; i < 20; ++i) lines.push_back("pid " + std::to_string(i));
  const std::string s = join_process_lines(lines, 16);
  EXPECT_NE(s.find("pid 15; and 4 more processes"), std::string::npos) << s;
  EXPECT_EQ(s.find("pid 16"), std::string::npos);
  EXPECT_EQ(join_process_lines({}), "");
}
