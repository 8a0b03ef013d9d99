#include "ledger/ledger.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "common/event_io.h"

namespace ledger {

namespace {

struct Record {
  const char* name;
  int64_t begin;
  int64_t end;
  int32_t ret;
  uint32_t first_arg;  // index into ThreadLog::args
  uint8_t nargs;
};

struct ThreadLog {
  int64_t tid;
  std::vector<Record> records;
  std::vector<Arg> args;
};

struct Injected {
  std::string step, name;
  std::vector<int> codes;
};

struct State {
  bool enabled = false;
  std::string path;
  std::string workload, cudart;
  std::vector<std::string> argv;
  std::mutex mu;  // guards logs (registration only) and the maps below
  std::vector<std::unique_ptr<ThreadLog>> logs;  // owned here, so data outlives its thread
  std::map<std::string, int64_t> intended;
  std::vector<Injected> injected;
  nlohmann::json info = nlohmann::json::object();
  bool finished = false;
};

State& state() {
  static State s;
  return s;
}

thread_local ThreadLog* t_log = nullptr;

ThreadLog& thread_log() {
  if (!t_log) {
    auto log = std::make_unique<ThreadLog>();
    log->tid = int64_t(syscall(SYS_gettid));
    log->records.reserve(1 << 12);
    log->args.reserve(1 << 14);
    std::lock_guard lk(state().mu);
    t_log = log.get();
    state().logs.push_back(std::move(log));
  }
  return *t_log;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

nlohmann::json arg_value(const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::Int: return a.i;
    case Arg::Kind::Ptr: return hex(a.p);
    case Arg::Kind::Str: return a.s ? a.s : "";
    case Arg::Kind::Dim3: return nlohmann::json::array({a.d[0], a.d[1], a.d[2]});
  }
  return nullptr;
}

}  // namespace

void start(const char* workload, const char* cudart, int argc, char** argv) {
  State& s = state();
  s.workload = workload;
  s.cudart = cudart;
  s.argv.assign(argv, argv + argc);
  const char* path = std::getenv(kEnvVar);
  s.enabled = path && *path;
  if (s.enabled) s.path = path;
  // A workload that returns from main without finish() still leaves its ledger behind.
  std::atexit([] { finish(); });
}

bool enabled() { return state().enabled; }

void record(const char* name, int64_t begin, int64_t end, int ret, std::initializer_list<Arg> args) {
  if (!state().enabled) return;
  ThreadLog& log = thread_log();
  log.records.push_back(Record{name, begin, end, ret, uint32_t(log.args.size()), uint8_t(args.size())});
  log.args.insert(log.args.end(), args.begin(), args.end());
}

void intend(const char* name, int64_t count) {
  std::lock_guard lk(state().mu);
  state().intended[name] += count;
}

void expect(const char* step, const char* name, std::vector<int> codes) {
  std::lock_guard lk(state().mu);
  state().injected.push_back({step, name, std::move(codes)});
}

void info(const char* key, int64_t value) {
  std::lock_guard lk(state().mu);
  state().info[key] = value;
}

void info(const char* key, const std::string& value) {
  std::lock_guard lk(state().mu);
  state().info[key] = value;
}

bool finish() {
  State& s = state();
  std::lock_guard lk(s.mu);
  if (!s.enabled || s.finished) return true;
  s.finished = true;
  try {
    cudatrace::EventWriter out(s.path);
    const int64_t pid = getpid();

    cudatrace::Event header;
    header.layer = cudatrace::layer::kMeta;
    header.name = "ledger";
    header.ts = cudatrace::monotonic_ns();
    header.pid = pid;
    header.tid = pid;
    nlohmann::json injected = nlohmann::json::array();
    for (const auto& inj : s.injected) injected.push_back({{"step", inj.step}, {"name", inj.name}, {"codes", inj.codes}});
    size_t total = 0;
    for (const auto& log : s.logs) total += log->records.size();
    header.args = {{"workload", s.workload}, {"cudart", s.cudart},     {"argv", s.argv},
                   {"intended", s.intended}, {"injected", injected},  {"threads", s.logs.size()},
                   {"records", total},       {"info", s.info}};
    out.write(header);

    // Threads one after another, each in program order: per-thread order is what matters.
    for (const auto& log : s.logs) {
      for (const Record& r : log->records) {
        cudatrace::Event e;
        e.layer = cudatrace::layer::kRuntime;
        e.name = r.name;
        e.ts = r.begin;
        e.dur = r.end - r.begin;
        e.pid = pid;
        e.tid = log->tid;
        if (r.ret != kNoRet) e.ret = r.ret;
        for (uint32_t i = 0; i < r.nargs; ++i) {
          const Arg& a = log->args[r.first_arg + i];
          e.args[a.key] = arg_value(a);
        }
        out.write(e);
      }
    }
    out.close();
    return true;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "ledger: %s\n", ex.what());
    return false;
  }
}

}  // namespace ledger
