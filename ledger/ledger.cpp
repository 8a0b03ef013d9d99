#include "ledger/ledger.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <queue>

#include "common/device_id.h"
#include "common/event_io.h"
#include "common/event_store.h"

namespace ledger {

namespace {

struct Record {
  const char* name;
  const char* layer;
  const char* by;
  int64_t begin;
  int64_t end;
  int32_t ret;
  int32_t device;      // kNoDevice: none
  uint32_t first_arg;  // index into ThreadLog::args
  uint8_t nargs;
};
constexpr int32_t kNoDevice = -1;

struct ThreadLog {
  int64_t tid;
  int64_t pid;  // the process that made the log: a forked child writes only its own
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
  std::map<int, std::string> device_ids;  // ordinal -> PCI bus id, as the workload learnt it
  bool finished = false;
};

State& state() {
  static State s;
  return s;
}

thread_local ThreadLog* t_log = nullptr;
thread_local int t_device = 0;  // CUDA's rule: a thread's device is 0 until it sets one

ThreadLog& thread_log() {
  if (!t_log) {  // start() resets it in a forked child (no getpid() per record: strace would see it)
    auto log = std::make_unique<ThreadLog>();
    log->tid = int64_t(syscall(SYS_gettid));
    log->pid = getpid();
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
  static bool exit_hook = false;
  {
    // A forked child starts its own ledger: nothing inherited from the parent is its.
    std::lock_guard lk(s.mu);
    s.logs.clear();
    s.intended.clear();
    s.injected.clear();
    s.info = nlohmann::json::object();
    s.finished = false;
  }
  t_log = nullptr;
  t_device = 0;
  s.workload = workload;
  s.cudart = cudart;
  s.argv.assign(argv, argv + argc);
  const char* path = std::getenv(kEnvVar);
  s.enabled = path && *path;
  if (s.enabled) s.path = path;
  // A workload that returns from main without finish() still leaves its ledger behind.
  if (!exit_hook) std::atexit([] { finish(); });
  exit_hook = true;
}

bool enabled() { return state().enabled; }

void set_current_device(int device) { t_device = device; }
int current_device() { return t_device; }

void device_identity(int device, const char* pci_bus_id) {
  if (!pci_bus_id || !*pci_bus_id) return;
  const std::string id = cudatrace::normalize_pci_bus_id(pci_bus_id);
  if (id.empty()) return;
  std::lock_guard lk(state().mu);
  state().device_ids[device] = id;
}

namespace {
// Calls that concern the thread or the process, not a device.
bool of_no_device(const char* name) {
  static const char* const kNames[] = {"cudaRuntimeGetVersion", "cudaDriverGetVersion", "cudaGetDeviceCount",
                                       "cudaGetLastError",      "cudaPeekAtLastError",  "cudaGetErrorString",
                                       "cudaGetErrorName"};
  for (const char* n : kNames)
    if (std::strcmp(n, name) == 0) return true;
  return false;
}

void append(const char* layer, const char* name, int64_t begin, int64_t end, int ret, std::initializer_list<Arg> args,
            const char* by = nullptr) {
  if (!state().enabled) return;
  ThreadLog& log = thread_log();
  const bool driver = std::strcmp(layer, cudatrace::layer::kDriver) == 0;
  const int32_t device = driver || of_no_device(name) ? kNoDevice : int32_t(t_device);
  log.records.push_back(
      Record{name, layer, by, begin, end, ret, device, uint32_t(log.args.size()), uint8_t(args.size())});
  log.args.insert(log.args.end(), args.begin(), args.end());
}
}  // namespace

void record(const char* name, int64_t begin, int64_t end, int ret, std::initializer_list<Arg> args, const char* by) {
  append(cudatrace::layer::kRuntime, name, begin, end, ret, args, by);
}

void record_driver(const char* name, int64_t begin, int64_t end, int ret, std::initializer_list<Arg> args) {
  append(cudatrace::layer::kDriver, name, begin, end, ret, args);
}

void executed(const char* kernel, const uint32_t grid[3], const uint32_t block[3], int64_t times) {
  const int64_t t = now();
  append(cudatrace::layer::kExecution, kernel, t, t, kNoRet,
         {Arg::Dim3("grid", grid[0], grid[1], grid[2]), Arg::Dim3("block", block[0], block[1], block[2]),
          Arg::Int("times", times)});
}

namespace {
// The first process to finish takes the path; every other one (a forked child, a program
// it exec'd) takes PATH.<pid>. Created exclusively, never through a link.
std::pair<int, std::string> claim_path(const std::string& path) {
  for (const std::string& p : {path, path + "." + std::to_string(getpid())}) {
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) return {fd, p};
    if (errno != EEXIST) throw std::runtime_error("cannot create " + p + ": " + std::strerror(errno));
  }
  throw std::runtime_error("cannot create " + path + "." + std::to_string(getpid()) + ": it exists already");
}
}  // namespace

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

namespace {
// One call as the ledger's record.
void write_record(const State& s, const ThreadLog& log, const Record& r, int64_t pid, cudatrace::EventStoreWriter& out,
                  cudatrace::Event& e) {
  e = cudatrace::Event{};
  e.layer = r.layer;
  e.name = r.name;
  e.ts = r.begin;
  e.dur = r.end - r.begin;
  e.pid = pid;
  e.tid = log.tid;
  if (r.ret != kNoRet) e.ret = r.ret;
  if (r.device != kNoDevice) {
    e.device = r.device;
    if (auto id = s.device_ids.find(r.device); id != s.device_ids.end()) e.device_id = id->second;
  }
  for (uint32_t i = 0; i < r.nargs; ++i) {
    const Arg& a = log.args[r.first_arg + i];
    e.args[a.key] = arg_value(a);
  }
  if (r.by) e.args["by"] = r.by;
  out.write(e);
}

// The threads' calls merged in the order they began, each thread's in program order (what
// the harness pairs by). Written one thread after another, a ledger kept one of the
// harness's pairing threads busy at a time, each thread's calls being paired on one.
void write_in_time_order(const State& s, int64_t pid, cudatrace::EventStoreWriter& out) {
  std::vector<const ThreadLog*> logs;
  for (const auto& log : s.logs)
    if (log->pid == pid && !log->records.empty()) logs.push_back(log.get());
  std::vector<size_t> at(logs.size(), 0);
  using Next = std::pair<int64_t, size_t>;  // (its next call's begin, the log)
  std::priority_queue<Next, std::vector<Next>, std::greater<>> next;
  for (size_t i = 0; i < logs.size(); ++i) next.push({logs[i]->records[0].begin, i});
  cudatrace::Event e;
  while (!next.empty()) {
    const size_t i = next.top().second;
    next.pop();
    write_record(s, *logs[i], logs[i]->records[at[i]], pid, out, e);
    if (++at[i] < logs[i]->records.size()) next.push({logs[i]->records[at[i]].begin, i});
  }
}
}  // namespace

bool finish() {
  State& s = state();
  std::lock_guard lk(s.mu);
  if (!s.enabled || s.finished) return true;
  s.finished = true;
  try {
    const int64_t pid = getpid();
    const auto [fd, claimed] = claim_path(s.path);
    cudatrace::EventStoreWriter out(fd, claimed);
    out.end_frame_every(kFrameRecords);  // the harness decodes the frames on several threads

    cudatrace::Event header;
    header.layer = cudatrace::layer::kMeta;
    header.name = "ledger";
    header.ts = cudatrace::monotonic_ns();
    header.pid = pid;
    header.tid = pid;
    nlohmann::json injected = nlohmann::json::array();
    for (const auto& inj : s.injected) injected.push_back({{"step", inj.step}, {"name", inj.name}, {"codes", inj.codes}});
    size_t total = 0, threads = 0;
    for (const auto& log : s.logs)
      if (log->pid == pid) total += log->records.size(), ++threads;
    header.args = {{"workload", s.workload}, {"cudart", s.cudart},     {"argv", s.argv},
                   {"intended", s.intended}, {"injected", injected},  {"threads", threads},
                   {"records", total},       {"info", s.info}};
    if (!s.device_ids.empty()) {
      nlohmann::json ids = nlohmann::json::object();
      for (const auto& [d, id] : s.device_ids) ids[std::to_string(d)] = id;
      header.args["device_ids"] = ids;
    }
    out.write(header);

    write_in_time_order(s, pid, out);
    out.close();
    return true;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "ledger: %s\n", ex.what());
    return false;
  }
}

}  // namespace ledger
