// The jaxprof hook (tracers/jaxprof/hook/, with tracers/pyhook/) in a real Python
// interpreter, started the way JaxprofTracer::prepare() shapes the command, with a stand-in
// `jax` package whose profiler writes the recorded H200 trace (tests/fixtures/jaxprof/real/)
// where jax.profiler.stop_trace writes its own: one trace per process (a spawned child too),
// none at import (only at the first backend initialization), a user's sitecustomize still
// run, a program's own jax.profiler.trace still working, and a program that never imports
// jax said to be one. Needs python3, not jax nor a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "common/event_store.h"
#include "test_support.h"
#include "tracers/jaxprof/jaxprof_tracer.h"

using namespace cudatrace;
using testsupport::temp_dir;
namespace fs = std::filesystem;

namespace {

fs::path write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// jax as the hook uses it: xla_bridge.backends() is the door of a process's first use of a
// device (get_backend() looks it up at call time, as jax's does); profiler.start_trace()
// initializes the backends itself and runs one trace at a time; stop_trace() writes
// <log_dir>/plugins/profile/<run>/perfetto_trace.json.gz (here: the recorded trace).
const char* kFakeJax = R"PY(
__version__ = "0.0+fake"
from jax._src import xla_bridge
from jax import profiler
def devices():
    return [xla_bridge.get_backend()]
)PY";

const char* kFakeXlaBridge = R"PY(
import os
_backends = {}
def backends():
    if not _backends:
        with open(os.path.join(os.environ["CUDATRACE_JAXPROF_DIR"], os.pardir, "backends.log"), "a") as f:
            f.write("%d\n" % os.getpid())
        _backends["cuda"] = "fake-cuda"
    return _backends
def get_backend(platform=None):
    return backends()["cuda"]
)PY";

const char* kFakeProfiler = R"PY(
import contextlib, os, shutil, time
from jax._src import xla_bridge
_log_dir = None
def start_trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False, profiler_options=None):
    global _log_dir
    if _log_dir is not None:
        raise RuntimeError("Profile has already been started. Only one profile may be run at a time.")
    xla_bridge.get_backend()
    _log_dir = str(log_dir)
def stop_trace():
    global _log_dir
    if _log_dir is None:
        raise RuntimeError("No profile started")
    run = os.path.join(_log_dir, "plugins", "profile", time.strftime("%Y_%m_%d_%H_%M_%S"))
    os.makedirs(run)
    shutil.copyfile(os.environ["FAKE_JAX_TRACE"], os.path.join(run, "perfetto_trace.json.gz"))
    _log_dir = None
@contextlib.contextmanager
def trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False):
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace)
    try:
        yield
    finally:
        stop_trace()
)PY";

const char* kProgram = R"PY(
import multiprocessing as mp, os, sys
def child():
    import jax
    jax.devices()
if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=child)
    p.start()
    p.join()
    import jax
    from jax._src import xla_bridge
    at_import = len(xla_bridge._backends)  # the hook must not have started the backends
    jax.devices()
    worker = os.fork()  # a forked worker: not traced, and says so
    if worker == 0:
        os._exit(0)
    os.waitpid(worker, 0)
    with open(sys.argv[1], "w") as f:
        f.write("%s %d" % (os.environ.get("USER_SITECUSTOMIZE", "not run"), at_import))
)PY";

struct HookRun {
  fs::path run_dir, spool, events;
  TracerReport report;
  int exit_code = -1;
  std::string marker;
};

HookRun run_with_hook(const std::string& program, const std::string& tag) {
  HookRun h;
  h.run_dir = temp_dir(tag);
  h.spool = h.run_dir / "target";
  fs::create_directories(h.spool);
  const fs::path user = h.run_dir / "user", fake = h.run_dir / "fake";
  write(user / "sitecustomize.py", "import os\nos.environ['USER_SITECUSTOMIZE'] = 'ran'\n");
  write(fake / "jax" / "__init__.py", kFakeJax);
  write(fake / "jax" / "profiler.py", "from jax._src.profiler import start_trace, stop_trace, trace\n");
  write(fake / "jax" / "_src" / "__init__.py", "");
  write(fake / "jax" / "_src" / "xla_bridge.py", kFakeXlaBridge);
  write(fake / "jax" / "_src" / "profiler.py", kFakeProfiler);
  const fs::path prog = write(h.run_dir / "prog.py", program);
  const char* old = std::getenv("PYTHONPATH");
  const std::string kept = old ? old : "";
  setenv("PYTHONPATH", (user.string() + ":" + fake.string()).c_str(), 1);
  JaxprofTracer tracer(fs::path(CUDATRACE_HOOKS) / "jaxprof", uint64_t(1) << 30);
  Launch launch{{"python3", prog.string()}, {}};
  Target target{launch.argv, "none", h.spool};
  tracer.prepare(launch, target, h.run_dir);
  if (old) setenv("PYTHONPATH", kept.c_str(), 1);
  else unsetenv("PYTHONPATH");
  std::string command = "env FAKE_JAX_TRACE=" + (fs::path(CUDATRACE_FIXTURES) / "jaxprof/real/jit_loop/perfetto_trace.json.gz").string();
  for (const auto& [k, v] : launch.env) command += " " + k + "=" + v;
  command += " python3 " + prog.string() + " " + (h.run_dir / "marker").string();
  h.exit_code = testsupport::run_command(command).exit_code;
  h.report = tracer.finish(h.run_dir);
  h.events = h.run_dir / kEventsFile;
  std::ifstream marker(h.run_dir / "marker");
  std::getline(marker, h.marker);
  return h;
}

bool have_python3() { return testsupport::run_command("python3 -c pass").exit_code == 0; }

}  // namespace

TEST(JaxprofHook, TracesEveryProcessFromItsFirstBackendAndChainsTheUsersSitecustomize) {
  if (!have_python3()) GTEST_SKIP() << "python3 not on PATH: the hook is Python";
  const HookRun h = run_with_hook(kProgram, "jaxprof-hook");
  ASSERT_EQ(h.exit_code, 0);
  EXPECT_EQ(h.marker, "ran 0");  // the user's sitecustomize ran; no backend at jax's import
  EXPECT_EQ(h.report.layers.size(), 2u) << h.report.notes.dump();
  EXPECT_EQ(h.report.notes["processes_profiled"], 2) << h.report.notes.dump();  // the parent and its spawned child
  EXPECT_EQ(h.report.notes["traces"], 2);
  EXPECT_EQ(h.report.notes["forked_children_untraced"], 1);
  EXPECT_NE(h.report.partly_unobserved.at(layer::kGpuActivity).find("1 forked child"), std::string::npos);
  for (const auto& [counter, n] : h.report.loss.items()) EXPECT_EQ(n, 0) << counter;
  std::map<int64_t, int> per_pid;
  EventReader in(h.events);
  Event e;
  while (in.next(e)) ++per_pid[e.pid];
  ASSERT_EQ(per_pid.size(), 2u);
  for (const auto& [pid, n] : per_pid) EXPECT_EQ(n, 60) << pid;
}

// Libraries ask importlib.util.find_spec("jax") before they import it (transformers does), and
// throw that spec away: the hook arms on the import that runs jax's __init__, not on the first
// search.
TEST(JaxprofHook, AFindSpecBeforeTheImportStillArmsTheHook) {
  if (!have_python3()) GTEST_SKIP() << "python3 not on PATH: the hook is Python";
  const HookRun h = run_with_hook(std::string("import importlib.util\nassert importlib.util.find_spec('jax')\n") + kProgram,
                                  "jaxprof-hook-findspec");
  ASSERT_EQ(h.exit_code, 0);
  EXPECT_EQ(h.report.notes["processes_profiled"], 2) << h.report.notes.dump();
  EXPECT_EQ(h.report.notes["traces"], 2);
}

TEST(JaxprofHook, AProgramThatNeverImportsJaxIsSaidToBeOne) {
  if (!have_python3()) GTEST_SKIP() << "python3 not on PATH: the hook is Python";
  const HookRun h = run_with_hook("import sys\nprint('no jax here')\n", "jaxprof-hook-nojax");
  ASSERT_EQ(h.exit_code, 0);
  EXPECT_TRUE(h.report.layers.empty());
  EXPECT_EQ(h.report.unobserved.at(layer::kRuntime),
            "1 Python process(es) ran and none imported jax: nothing for jax.profiler to trace");
  EXPECT_FALSE(fs::exists(h.events));
}

TEST(JaxprofHook, AProgramThatImportsJaxAndNeverUsesADeviceIsSaidToBeOne) {
  if (!have_python3()) GTEST_SKIP() << "python3 not on PATH: the hook is Python";
  const HookRun h = run_with_hook("import jax\nprint('no device')\n", "jaxprof-hook-nobackend");
  ASSERT_EQ(h.exit_code, 0);
  EXPECT_TRUE(h.report.layers.empty());
  EXPECT_NE(h.report.unobserved.at(layer::kGpuActivity).find("none initialized a backend"), std::string::npos)
      << h.report.unobserved.at(layer::kGpuActivity);
  EXPECT_FALSE(fs::exists(h.run_dir / "backends.log"));  // the hook started none
}

// jax.profiler runs one trace at a time: a program that traces itself would have failed with
// "Profile has already been started" under the hook's. Its own trace runs; the hook's ends
// there, written, and the run says so.
TEST(JaxprofHook, AProgramsOwnTraceStillRunsAndTheHooksEndsThere) {
  if (!have_python3()) GTEST_SKIP() << "python3 not on PATH: the hook is Python";
  const HookRun h = run_with_hook(
      "import os, sys, jax\njax.devices()\nwith jax.profiler.trace(os.path.join(os.path.dirname(sys.argv[1]), 'own')):\n"
      "    jax.devices()\nopen(sys.argv[1], 'w').write('own trace ran')\n",
      "jaxprof-hook-own");
  ASSERT_EQ(h.exit_code, 0);
  EXPECT_EQ(h.marker, "own trace ran");
  EXPECT_TRUE(fs::exists(h.run_dir / "own" / "plugins" / "profile"));
  EXPECT_EQ(h.report.notes["traces"], 1) << h.report.notes.dump();
  EXPECT_EQ(h.report.notes["traces_yielded_to_the_program"], 1);
  EXPECT_NE(h.report.partly_unobserved.at(layer::kGpuActivity).find("started jax.profiler themselves"), std::string::npos);
  for (const auto& [counter, n] : h.report.loss.items()) EXPECT_EQ(n, 0) << counter;
}

TEST(JaxprofHook, TheBenchmarkSeesNoLayerWithoutEventsAndAbandonRemovesTheFiles) {
  const fs::path dir = temp_dir("jaxprof-abandon");
  fs::create_directories(dir / "target");
  JaxprofTracer tracer(fs::path(CUDATRACE_HOOKS) / "jaxprof", uint64_t(1) << 30);
  Launch launch{{"/bin/true"}, {}};
  Target target{launch.argv, "static", dir / "target"};
  tracer.prepare(launch, target, dir);
  EXPECT_EQ(launch.env.at(kJaxprofDirEnv), (dir / "target").string());
  EXPECT_EQ(launch.env.at("PYTHONPATH").rfind((fs::path(CUDATRACE_HOOKS) / "jaxprof").string(), 0), 0u);
  // A C++ benchmark loads no interpreter: its cost is not jaxprof's whole cost, and says so.
  EXPECT_EQ(tracer.layers_without_events().unobserved.size(), 3u);
  write(dir / "target" / "jaxprof.9.status.json", "{\"phase\": \"profiling\"}");
  fs::create_directories(dir / "target" / "jaxprof.9" / "plugins");
  const auto loss = tracer.loss_without_events(dir);
  ASSERT_TRUE(loss.has_value());
  EXPECT_EQ(loss->at("traces_missing"), 1);
  tracer.abandon(dir);
  EXPECT_TRUE(fs::is_empty(dir / "target"));
}
