// preload_call_cost: what the preload shim adds to one cheap CUDA call on this host's CPU,
// without a GPU. The program is linked to the fake libcudart and libcuda.so.1 of the
// device tests (tests/support/preload_devices/), which answer at once, so what is timed
// is the shim's own path: the hook, the two TSC reads, the append, the buffer's flushes.
// It runs itself as a child, untraced and under LD_PRELOAD of the shim in turn (rounds
// alternate which goes first), and compares the children's median batches: the same A/B
// as bench/percall.cu's untraced run against a traced one on a GPU. Under the shim the
// child also alternates live and paused batches (cudatrace_pause), percall's in-process
// A/B. Each call's records are checked to have reached the spool.
//
//   preload_call_cost SHIM [--calls N] [--batches K] [--rounds R] [--cpu C]
//
// The calls, and the records each makes under the shim:
//   cudaGetDevice    a listed runtime hook (1)
//   cudaEventRecord  a listed runtime hook whose cudart calls cuEventRecord, as the real
//                    one reaches the driver's hook through cuGetProcAddress (2)
//   cuEventRecord    a listed driver hook (1)
//   cuLaunchKernel   a listed driver hook with its kernel-handle cache (1)
//   cuCtxGetDevice   a generic forwarder's slim path (1)
// Prints one line per call: added_ns (traced minus untraced), per record, the in-process
// live-minus-paused, and the same in the calling thread's own CPU time (thread_cpu_ns:
// what the call cost the thread that made it; the shim's writer thread, which writes full
// buffers, runs beside it on another core when one is free). Fails only on a broken run or an absurd figure (over
// 5 us a record): a timing is a benchmark figure, not a threshold.
#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

extern "C" {
int cudaGetDevice(int*);
int cudaEventRecord(void*, void*);
int cuEventRecord(void*, void*);
int cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
int cuCtxGetDevice(int*);
}

namespace {

struct Call {
  const char* name;
  int records;  // under the shim, per call
  void (*body)();
};

void* const kEvent = reinterpret_cast<void*>(0x1000);
void* const kKernel = reinterpret_cast<void*>(0x2000);

const Call kCalls[] = {
    {"cudaGetDevice", 1, [] { int d; (void)cudaGetDevice(&d); }},
    {"cudaEventRecord", 2, [] { (void)cudaEventRecord(kEvent, nullptr); }},
    {"cuEventRecord", 1, [] { (void)cuEventRecord(kEvent, nullptr); }},
    {"cuLaunchKernel", 1, [] { (void)cuLaunchKernel(kKernel, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr); }},
    {"cuCtxGetDevice", 1, [] { int d; (void)cuCtxGetDevice(&d); }},
};
constexpr int kWarmup = 1000;

int64_t now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Prints the batch's wall time per call, and the calling thread's own CPU time per call
// (what the call costs the thread that made it, wherever else the shim's writer runs).
void timed_batch(const Call& c, const char* mode, long calls) {
  const int64_t t0 = now(), c0 = thread_cpu();
  for (long i = 0; i < calls; ++i) c.body();
  const int64_t c1 = thread_cpu(), t1 = now();
  std::printf("%s %s %.3f\n%s %s_cpu %.3f\n", c.name, mode, double(t1 - t0) / double(calls), c.name, mode,
              double(c1 - c0) / double(calls));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The child: K batches of each call, printed as "NAME MODE NS". Under the shim each batch is
// timed live, then paused (the pause flips a flag: nothing else moves between the two).
int child(long calls, int batches) {
  int d = -1;
  if (cudaGetDevice(&d) != 0) return 3;  // the fake cudart makes device 0's context current
  auto pause = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "cudatrace_pause"));
  // The shim's record count (tracers/pause_hook.h), which the GPU benchmark divides a call's
  // cost by: it must say what the shim wrote, each call's records live and none paused.
  auto records = reinterpret_cast<unsigned long long (*)()>(dlsym(RTLD_DEFAULT, "cudatrace_records"));
  if (pause && !records) {
    std::fprintf(stderr, "preload_call_cost: the shim exports cudatrace_pause but not cudatrace_records\n");
    return 4;
  }
  for (const Call& c : kCalls)
    for (int i = 0; i < kWarmup; ++i) c.body();  // resolves each hook, maps the buffer
  for (int k = 0; k < batches; ++k)
    for (const Call& c : kCalls) {
      const unsigned long long before = records ? records() : 0;
      timed_batch(c, pause ? "live" : "plain", calls);
      if (!pause) continue;
      const unsigned long long live = records() - before;
      pause(1);
      timed_batch(c, "paused", calls);
      pause(0);
      const unsigned long long paused = records() - before - live;
      if (live != (unsigned long long)(c.records) * (unsigned long long)(calls) || paused != 0) {
        std::fprintf(stderr, "preload_call_cost: cudatrace_records counted %llu records for %ld live calls of %s "
                     "(%d a call expected) and %llu paused\n", live, calls, c.name, c.records, paused);
        return 4;
      }
    }
  return 0;
}

// Runs this program as a child (with `env` added) and returns its lines.
std::vector<std::string> run_child(const char* self, const std::vector<std::string>& env, long calls, int batches) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    const std::string n = std::to_string(calls), k = std::to_string(batches);
    execl(self, self, "--child", n.c_str(), k.c_str(), (char*)nullptr);
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t r; (r = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(r));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "preload_call_cost: a child failed (status %d)\n", status);
    return {};
  }
  std::vector<std::string> lines;
  for (size_t p = 0, q; (q = out.find('\n', p)) != std::string::npos; p = q + 1) lines.push_back(out.substr(p, q - p));
  return lines;
}

// Bytes of record files in the spool, which is emptied.
long long drain_spool(const std::string& dir) {
  long long bytes = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string path = dir + "/" + e->d_name;
      struct stat st {};
      if (std::strstr(e->d_name, ".bin") && stat(path.c_str(), &st) == 0) bytes += st.st_size;
      unlink(path.c_str());
    }
    closedir(d);
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) return child(std::atol(argv[2]), std::atoi(argv[3]));
  if (argc < 2) {
    std::fprintf(stderr, "usage: preload_call_cost SHIM [--calls N] [--batches K] [--rounds R] [--cpu C]\n");
    return 2;
  }
  const std::string shim = argv[1];
  long calls = 100000;
  int batches = 3, rounds = 5, cpu = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--calls") calls = std::atol(argv[i + 1]);
    else if (flag == "--batches") batches = std::atoi(argv[i + 1]);
    else if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (flag == "--cpu") cpu = std::atoi(argv[i + 1]);
  }
  if (calls <= 0 || batches <= 0 || rounds <= 0) return 2;
  if (cpu >= 0) {  // inherited by the children
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("sched_setaffinity");
  }
  char tmpl[] = "/tmp/preload_call_cost.XXXXXX";
  if (!mkdtemp(tmpl)) return 2;
  const std::string spool = tmpl;
  const std::vector<std::string> traced_env = {"LD_PRELOAD=" + shim, "CUDATRACE_PRELOAD_DIR=" + spool};

  // name -> mode -> batches; and the live-minus-paused pairs, in order.
  std::map<std::string, std::map<std::string, std::vector<double>>> ns;
  long long expected_records = 0, spooled_bytes = 0;
  bool ok = true;
  for (int r = 0; r < rounds && ok; ++r)
    for (int half = 0; half < 2 && ok; ++half) {
      const bool traced = (r + half) % 2 == 1;
      const auto lines = run_child(argv[0], traced ? traced_env : std::vector<std::string>{}, calls, batches);
      ok = !lines.empty();
      for (const std::string& line : lines) {
        char name[64], mode[16];
        double v = 0;
        if (std::sscanf(line.c_str(), "%63s %15s %lf", name, mode, &v) == 3) ns[name][mode].push_back(v);
      }
      if (traced) {
        spooled_bytes += drain_spool(spool);
        for (const Call& c : kCalls) expected_records += c.records * (1 + kWarmup + calls * batches);
      }
    }
  rmdir(spool.c_str());
  if (!ok) return 1;

  std::printf("preload_call_cost: this host's CPU, fake CUDA libraries (no GPU); medians of %d rounds x %d batches of "
              "%ld calls%s\n",
              rounds, batches, calls, cpu >= 0 ? (", on CPU " + std::to_string(cpu)).c_str() : "");
  std::printf("%-16s %7s %12s %10s %9s %11s %14s %14s\n", "call", "records", "untraced_ns", "traced_ns", "added_ns",
              "per_record", "live-paused_ns", "thread_cpu_ns");
  bool sane = true;
  for (const Call& c : kCalls) {
    auto& m = ns[c.name];
    auto pairs = [&](const char* live, const char* paused) {
      std::vector<double> d;
      for (size_t i = 0; i < m[live].size() && i < m[paused].size(); ++i) d.push_back(m[live][i] - m[paused][i]);
      return median(d);
    };
    const double untraced = median(m["plain"]), traced = median(m["live"]), added = traced - untraced;
    std::printf("%-16s %7d %12.1f %10.1f %9.1f %11.1f %14.1f %14.1f\n", c.name, c.records, untraced, traced, added,
                added / c.records, pairs("live", "paused"), pairs("live_cpu", "paused_cpu"));
    sane = sane && m["plain"].size() == m["live"].size() && !m["live"].empty() && added / c.records < 5000;
  }
  // Every live call recorded (paused ones make none): what the shim spooled covers them.
  const long long spooled_records = spooled_bytes / 64;
  std::printf("records spooled %lld, calls made live %lld\n", spooled_records, expected_records);
  if (spooled_records < expected_records) {
    std::fprintf(stderr, "preload_call_cost: fewer records than live calls\n");
    return 1;
  }
  return sane ? 0 : 1;
}
