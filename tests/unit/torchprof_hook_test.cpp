// The torchprof hook (tracers/torchprof/hook/) in a real Python interpreter, started the way
// TorchprofTracer::prepare() shapes the command, with a stand-in `torch` package whose
// profiler writes a small trace in Kineto's layout: one trace per process (a spawned child
// too), a user's own sitecustomize still run, times placed on the harness's clock, and a
// program that never imports torch said to be one. Needs python3, not torch nor a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/event_store.h"
#include "test_support.h"
#include "tracers/torchprof/torchprof_tracer.h"

using namespace cudatrace;
using testsupport::temp_dir;
namespace fs = std::filesystem;

namespace {

fs::path write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// torch.cuda as the hook uses it: _lazy_init(), the door of a process's first CUDA use.
const char* kFakeCuda = R"PY(
_initialized = False
def is_initialized():
    return _initialized
def _lazy_init():
    global _initialized
    _initialized = True
def current_device():
    _lazy_init()
    return 0
def synchronize():
    _lazy_init()  # looked up at call time, as torch.cuda's own functions do: the hook's wrapper
from . import memory
)PY";

// As torch's own submodules do, one that took _lazy_init by name at import.
const char* kFakeCudaMemory = R"PY(
from . import _lazy_init
def memory_allocated():
    _lazy_init()
    return 0
)PY";

// torch.profiler.profile as the hook uses it: start(), stop(), export_chrome_trace(path).
// The trace it writes stamps unix time and counts it from Kineto's three-month base. As the
// real one does, stop() and the export go through torch.cuda (its _lazy_init, the hook's
// wrapper), and a profiler started while another runs cancels that one's trace (Kineto's
// "Cancelling current trace request in order to start higher priority synchronous
// request"), whose export then holds no event. Each start and cancel is logged beside the
// spool (profilers.log), so a test can count the profilers of each process.
const char* kFakeProfiler = R"PY(
import json, os, time
class ProfilerActivity:
    CPU = "cpu"
    CUDA = "cuda"
_running = None
def _log(what, prof):
    log = os.path.join(os.environ["CUDATRACE_TORCHPROF_DIR"], os.pardir, "profilers.log")
    with open(log, "a") as f:
        f.write("%s %d %d\n" % (what, os.getpid(), prof.serial))
class profile:
    _made = 0
    def __init__(self, activities):
        assert ProfilerActivity.CUDA in activities
        profile._made += 1
        self.serial = profile._made
        self.cancelled = False
    def start(self):
        global _running
        if _running is not None:
            _running.cancelled = True
            _log("cancel", _running)
        _running = self
        _log("start", self)
        self.t0 = time.time_ns()
    def stop(self):
        global _running
        import torch
        torch.cuda.synchronize()
        self.t1 = time.time_ns()
        if _running is self:
            _running = None
    def export_chrome_trace(self, path):
        import torch
        torch.cuda.synchronize()
        _log("export", self)
        base = time.time_ns() // (7889238 * 10**9) * (7889238 * 10**9)
        us = lambda ns: "%d.%03d" % ((ns - base) // 1000, (ns - base) % 1000)
        pid = os.getpid()
        events = ('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": %d, "tid": %d, '
                  '"ts": %s, "dur": 1.000, "args": {"cbid": 211, "correlation": 1}},\n'
                  '{"ph": "X", "cat": "kernel", "name": "fake_kernel", "pid": 0, "tid": 7, "ts": %s, "dur": 1.000, '
                  '"args": {"device": 0, "stream": 7, "correlation": 1, "grid": [1, 1, 1], "block": [32, 1, 1]}}\n'
                  ) % (pid, pid, us(self.t0), us(self.t1))
        text = '{"schemaVersion": 1, "baseTimeNanoseconds": %d, "traceEvents": [\n%s]}' % (
            base, "" if self.cancelled else events)
        with open(path, "w") as f:
            f.write(text)
)PY";

const char* kProgram = R"PY(
import multiprocessing as mp, os, sys
def child():
    import torch
    torch.cuda.memory.memory_allocated()  # its first CUDA use, through a submodule's _lazy_init
if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=child)
    p.start()
    p.join()
    import torch
    torch.cuda.current_device()
    torch.cuda.current_device()
    worker = os.fork()  # a forked worker, as a DataLoader's: not traced, and says so
    if worker == 0:
        os._exit(0)
    os.waitpid(worker, 0)
    with open(sys.argv[1], "w") as f:
        f.write(os.environ.get("USER_SITECUSTOMIZE", "not run"))
)PY";

struct HookRun {
  fs::path run_dir, spool, events;
  TracerReport report;
  int exit_code = -1;
  int64_t before = 0, after = 0;
};

// `program` run with python3 as the tracer's prepare() says, with the stand-in torch and a
// user's sitecustomize already on PYTHONPATH (the hook must put itself first and chain).
HookRun run_with_hook(const std::string& program, const std::string& tag) {
  HookRun h;
  h.run_dir = temp_dir(tag);
  h.spool = h.run_dir / "target";
  fs::create_directories(h.spool);
  const fs::path user = h.run_dir / "user", fake = h.run_dir / "fake";
  write(user / "sitecustomize.py", "import os\nos.environ['USER_SITECUSTOMIZE'] = 'ran'\n");
  write(fake / "torch" / "__init__.py", "__version__ = '0.0+fake'\nfrom . import cuda\n");
  write(fake / "torch" / "cuda" / "__init__.py", kFakeCuda);
  write(fake / "torch" / "cuda" / "memory.py", kFakeCudaMemory);
  write(fake / "torch" / "profiler" / "__init__.py", kFakeProfiler);
  const fs::path prog = write(h.run_dir / "prog.py", program);
  const char* old = std::getenv("PYTHONPATH");
  const std::string kept = old ? old : "";
  setenv("PYTHONPATH", (user.string() + ":" + fake.string()).c_str(), 1);
  TorchprofTracer tracer(fs::path(CUDATRACE_HOOKS) / "torchprof", uint64_t(1) << 30);
  Launch launch{{"python3", prog.string()}, {}};
  Target target{launch.argv, "none", h.spool};
  tracer.prepare(launch, target, h.run_dir);
  if (old) setenv("PYTHONPATH", kept.c_str(), 1);
  else unsetenv("PYTHONPATH");
  std::string command = "env";
  for (const auto& [k, v] : launch.env) command += " " + k + "=" + v;
  command += " python3 " + prog.string() + " " + (h.run_dir / "marker").string();
  h.before = monotonic_ns();
  h.exit_code = testsupport::run_command(command).exit_code;
  h.after = monotonic_ns();
  h.report = tracer.finish(h.run_dir);
  h.events = h.run_dir / kEventsFile;
  return h;
}

bool have_python3() { return testsupport::run_command("python3 -c pass").exit_code == 0; }

}  // namespace

TEST(TorchprofHook, TracesEveryProcessThatImportsTorchAndChainsTheUsersSitecustomize) {
  if (!have_python3()) GTEST_SKIP() << "python3 not on PATH: the hook is Python";
  const HookRun h = run_with_hook(kProgram, "torchprof-hook");
  ASSERT_EQ(h.exit_code, 0);
  std::ifstream marker(h.run_dir / "marker");
  std::string said;
  std::getline(marker, said);
  EXPECT_EQ(said, "ran");  // the user's sitecustomize, hidden by the hook's, still ran
  EXPECT_EQ(h.report.layers.size(), 3u) << h.report.notes.dump();
  EXPECT_EQ(h.report.notes["processes_profiled"], 2) << h.report.notes.dump();  // the parent and its spawned child
  EXPECT_EQ(h.report.notes["runtime_calls"], 2);
  EXPECT_EQ(h.report.notes["forked_children_untraced"], 1);
  EXPECT_NE(h.report.partly_unobserved.at(layer::kGpuActivity).find("1 forked child"), std::string::npos);
  for (const auto& [counter, n] : h.report.loss.items()) EXPECT_EQ(n, 0) << counter;
  EventReader in(h.events);
  Event e;
  int calls = 0;
  while (in.next(e)) {
    // Unix time through Kineto's base, then the harness's offset: inside the run, to a ms.
    EXPECT_GE(e.ts, h.before - 1000000) << e.name;
    EXPECT_LE(e.ts, h.after + 1000000) << e.name;
    if (e.layer == layer::kRuntime) {
      ++calls;
      EXPECT_EQ(e.tid, e.pid);
      EXPECT_EQ(e.device, 0);
    }
  }
  EXPECT_EQ(calls, 2);
}

TEST(TorchprofHook, AProgramThatNeverImportsTorchIsSaidToBeOne) {
  if (!have_python3()) GTEST_SKIP() << "python3 not on PATH: the hook is Python";
  const HookRun h = run_with_hook("import sys\nprint('no torch here')\n", "torchprof-hook-notorch");
  ASSERT_EQ(h.exit_code, 0);
  EXPECT_TRUE(h.report.layers.empty());
  EXPECT_NE(h.report.unobserved.at(layer::kRuntime).find("none imported torch"), std::string::npos)
      << h.report.unobserved.at(layer::kRuntime);
  EXPECT_FALSE(fs::exists(h.events));
}

TEST(TorchprofHook, AProgramThatImportsTorchAndNeverStartsCudaIsSaidToBeOne) {
  if (!have_python3()) GTEST_SKIP() << "python3 not on PATH: the hook is Python";
  const HookRun h = run_with_hook("import torch\nprint('cpu only')\n", "torchprof-hook-nocuda");
  ASSERT_EQ(h.exit_code, 0);
  EXPECT_TRUE(h.report.layers.empty());
  EXPECT_NE(h.report.unobserved.at(layer::kRuntime).find("none started CUDA"), std::string::npos)
      << h.report.unobserved.at(layer::kRuntime);
  EXPECT_EQ(h.report.notes["processes_without_cuda"], 1);
}

TEST(TorchprofHook, TheBenchmarkSeesNoLayerWithoutEventsAndAbandonRemovesTheFiles) {
  if (!have_python3()) GTEST_SKIP() << "python3 not on PATH: the hook is Python";
  const fs::path dir = temp_dir("torchprof-abandon");
  fs::create_directories(dir / "target");
  TorchprofTracer tracer(fs::path(CUDATRACE_HOOKS) / "torchprof", uint64_t(1) << 30);
  Launch launch{{"/bin/true"}, {}};
  Target target{launch.argv, "static", dir / "target"};
  tracer.prepare(launch, target, dir);
  EXPECT_EQ(launch.env.at(kTorchprofDirEnv), (dir / "target").string());
  EXPECT_EQ(launch.env.at("PYTHONPATH").rfind((fs::path(CUDATRACE_HOOKS) / "torchprof").string(), 0), 0u);
  // A C++ benchmark loads no interpreter: its cost is not torchprof's whole cost, and says so.
  EXPECT_EQ(tracer.layers_without_events().unobserved.size(), 3u);
  write(dir / "target" / "torchprof.9.status.json", "{\"phase\": \"profiling\"}");
  write(dir / "target" / "torchprof.9.json.tmp", "{");
  const auto loss = tracer.loss_without_events(dir);
  ASSERT_TRUE(loss.has_value());
  EXPECT_EQ(loss->at("traces_cut"), 1);
  tracer.abandon(dir);
  EXPECT_TRUE(fs::is_empty(dir / "target"));
}

// The stand-in's stop() and export go through torch.cuda's _lazy_init, the hook's wrapper, as
// torch's do. At f94b720 the export cleared the hook's profiler first, so the wrapper started
// a second one there, which cancelled the first's trace: every real trace came out with 64
// events and one CUDA call. One profiler per process, and its own trace exported, whole.
TEST(TorchprofHook, OneProfilerPerProcessAndItsOwnTraceIsTheOneExported) {
  if (!have_python3()) GTEST_SKIP() << "python3 not on PATH: the hook is Python";
  const HookRun h = run_with_hook(kProgram, "torchprof-hook-once");
  ASSERT_EQ(h.exit_code, 0);
  std::ifstream log(h.run_dir / "profilers.log");
  std::map<int64_t, std::vector<int>> started, exported;
  int cancelled = 0;
  std::string what;
  int64_t pid = 0;
  int serial = 0;
  while (log >> what >> pid >> serial) {
    if (what == "start") started[pid].push_back(serial);
    else if (what == "export") exported[pid].push_back(serial);
    else if (what == "cancel") ++cancelled;
  }
  EXPECT_EQ(started.size(), 2u);  // the parent and its spawned child; the forked worker none
  EXPECT_EQ(cancelled, 0);
  for (const auto& [p, serials] : started) {
    EXPECT_EQ(serials.size(), 1u) << "process " << p << " started " << serials.size() << " profilers";
    EXPECT_EQ(exported[p], serials) << "process " << p << " exported another profiler's trace";
  }
  // Each trace holds its process's call and kernel: none is an empty second profiler's.
  EXPECT_EQ(h.report.notes["traces"], 2) << h.report.notes.dump();
  EXPECT_EQ(h.report.notes["runtime_calls"], 2) << h.report.notes.dump();
  EXPECT_EQ(h.report.notes["kernels"], 2) << h.report.notes.dump();
}
