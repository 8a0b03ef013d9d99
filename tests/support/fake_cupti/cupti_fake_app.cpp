// Plays the CUDA driver and CUPTI for the injection library where there is no GPU: loads
// the library named by CUDA_INJECTION64_PATH and calls InitializeInjection, as the driver
// does at cuInit, then has the fake CUPTI (fake_cupti.cpp) report a fixed sequence:
//   corr 1  runtime cudaMalloc(4096) -> 0xdead000, returns 0
//   corr 2  runtime cudaMemcpy(0x1000, 0x2000, 64, HostToDevice), returns 1
//   corr 3  runtime __cudaLaunchKernel fake_kernel <<<(4,2,1), (256,1,1)>>>, returns 0,
//           with the driver's cuLaunchKernel inside it, and that kernel's activity record
//   corr 4  in a forked child: runtime cudaGetDevice -> 0, returns 0, with no context current
// The parent's calls have context 2 current (device 1, fake_cupti.cpp's cuptiGetDeviceId),
// and the kernel's activity record says device 1.
// Exit status 0, also when CUPTI is "taken" (the program must run on untraced).
// FAKE_APP_CHECK_PAUSE=1: instead, pause and resume the library (cudatrace_pause, as
// bench/percall does) and print what the fake CUPTI had switched on before, while paused
// and after: "pause 7 0 7" (bit 0 runtime, 1 driver callbacks, 2 kernel activity, 3 and 4
// runtime and driver API activity).
// FAKE_APP_LOOP=N (FAKE_APP_THREADS=T, default 1): instead, each of T threads makes N rounds
// of: cudaGetDevice; cuKernelGetName (the program's own); __cudaLaunchKernel with the
// driver's cuKernelGetName and cuLaunchKernel inside it (as cudart makes them under CUPTI);
// cudaGetDevice again. Five records a round: a batch (256) ends at every place in a round,
// inside the launch too.
// Correlation ids count up per thread from thread << 20. Prints "loop: NS ns per round"
// (the callbacks' own cost, no CUPTI in it) to stderr. Thread 0 then makes a cudaGetDevice
// and, 30 ms later, a cudaStreamSynchronize that takes 30 ms and then makes 300
// cuCtxGetDevice inside it (more than a batch), each top-level call between two CLOCK_MONOTONIC reads, printed
// to stdout as "bracket CORR BEGIN END": where a tracer's timestamps must fall. Before the
// rounds, a thread of its own makes one cudaGetDevice and ends: its batch goes out almost empty.
// FAKE_APP_EXPECT_RECORDS=1 (with FAKE_APP_LOOP, a collector attached): each loop thread
// checks that cudatrace_records counted its five records a round; exit status 5 if not.
// FAKE_APP_LIVE_AT_EXIT=N: instead, a thread makes N cudaGetDevice (corr 0xE0000000 + i) and
// then waits for ever, never ending; once it waits, the main thread makes one (corr
// 0xE0001000) and exits: the waiting thread's batch is still unsent then.
#include <cupti.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

extern "C" CUpti_CallbackFunc fake_cupti_callback(void** userdata);
extern "C" void fake_cupti_add_kernel(const CUpti_ActivityKernel10* k);
extern "C" int fake_cupti_enabled();

namespace {

CUpti_CallbackFunc g_callback = nullptr;
void* g_userdata = nullptr;
// The library's per-thread record count (cudatrace_records, tracers/pause_hook.h); checked
// against each loop thread's five records a round when FAKE_APP_EXPECT_RECORDS is set.
unsigned long long (*g_records)() = nullptr;
std::atomic<int> g_records_wrong{0};

// One API call as CUPTI reports it: entry, the call (`body`), exit.
CUcontext g_context = reinterpret_cast<CUcontext>(2);

template <class Params, class Body>
void api_call(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, uint32_t corr, Params& params, int ret,
              const char* symbol, Body body) {
  uint64_t correlation_data = 0;
  CUpti_CallbackData cb{};
  cb.context = g_context;
  cb.functionParams = &params;
  cb.functionReturnValue = &ret;
  cb.symbolName = symbol;
  cb.correlationData = &correlation_data;
  cb.correlationId = corr;
  cb.callbackSite = CUPTI_API_ENTER;
  g_callback(g_userdata, domain, cbid, &cb);
  body();
  cb.callbackSite = CUPTI_API_EXIT;
  g_callback(g_userdata, domain, cbid, &cb);
}

void nothing() {}

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void loop_rounds(uint64_t rounds, uint64_t thread) {
  const unsigned long long records_before = g_records ? g_records() : 0;
  uint32_t corr = uint32_t(thread << 20);
  int device = 0;
  const char* name = nullptr;
  cudaGetDevice_v3020_params get{&device};
  cuKernelGetName_params get_name{&name, reinterpret_cast<CUkernel>(0x77)};
  const void* stub = reinterpret_cast<const void*>(0x4242);
  cudaLaunchKernel_v7000_params launch{stub, dim3(4, 2, 1), dim3(256, 1, 1), nullptr, 0, nullptr};
  cuLaunchKernel_params driver_launch{reinterpret_cast<CUfunction>(0x5151), 4, 2, 1, 256, 1, 1, 0, nullptr, nullptr,
                                      nullptr};
  for (uint64_t i = 0; i < rounds; ++i) {
    api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, ++corr, get, 0, nullptr, nothing);
    api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuKernelGetName, ++corr, get_name, 0, nullptr, nothing);
    const uint32_t launch_corr = ++corr;
    api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, launch_corr, launch, 0,
             "fake_kernel", [&] {
               api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuKernelGetName, launch_corr, get_name, 0,
                        nullptr, nothing);
               api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, launch_corr, driver_launch,
                        0, "fake_kernel", nothing);
             });
    api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, ++corr, get, 0, nullptr, nothing);
  }
  if (g_records && std::getenv("FAKE_APP_EXPECT_RECORDS")) {
    const unsigned long long made = g_records() - records_before;
    if (made != 5 * rounds) {  // the cuKernelGetName inside each launch is left out, not recorded
      std::fprintf(stderr, "cupti_fake_app: thread %llu: cudatrace_records counted %llu for %llu rounds (5 a round)\n",
                   static_cast<unsigned long long>(thread), made, static_cast<unsigned long long>(rounds));
      ++g_records_wrong;
    }
  }
}

int run_loop(uint64_t rounds, uint64_t threads) {
  // First, while no other thread has ended: its allocations come from a fresh arena.
  std::thread([] {
    int device = 0;
    cudaGetDevice_v3020_params get{&device};
    api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0xF0000003u, get, 0, nullptr,
             nothing);
  }).join();
  const int64_t t0 = monotonic_ns();
  std::vector<std::thread> workers;
  for (uint64_t t = 1; t < threads; ++t) workers.emplace_back(loop_rounds, rounds, t);
  loop_rounds(rounds, 0);
  for (auto& w : workers) w.join();
  const double ns = double(monotonic_ns() - t0) / double(rounds);
  std::fprintf(stderr, "loop: %.1f ns per round\n", ns);
  const timespec pause{0, 30 * 1000 * 1000};
  const auto bracketed = [](uint32_t corr, auto call) {
    const int64_t begin = monotonic_ns();
    call();
    const int64_t end = monotonic_ns();
    std::printf("bracket %u %lld %lld\n", corr, static_cast<long long>(begin), static_cast<long long>(end));
  };
  int device = 0;
  cudaGetDevice_v3020_params get{&device};
  bracketed(0xF0000001u, [&] {
    api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0xF0000001u, get, 0, nullptr,
             nothing);
  });
  nanosleep(&pause, nullptr);
  // A long runtime call that fills a batch with its own driver calls: the batch ends while
  // it is in flight, 30 ms after it began.
  CUdevice ctx_device = 0;
  cuCtxGetDevice_params ctx_get{&ctx_device};
  cudaStreamSynchronize_v3020_params sync{nullptr};
  bracketed(0xF0000002u, [&] {
    api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 0xF0000002u, sync, 0,
             nullptr, [&] {
               nanosleep(&pause, nullptr);
               for (int i = 0; i < 300; ++i)
                 api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice, 0xF0000002u, ctx_get, 0,
                          nullptr, nothing);
             });
  });
  return 0;
}

int live_at_exit(uint64_t calls) {
  static std::atomic<bool> waiting{false};
  std::thread([calls] {
    int device = 0;
    cudaGetDevice_v3020_params get{&device};
    for (uint64_t i = 0; i < calls; ++i)
      api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, uint32_t(0xE0000000u + i), get,
               0, nullptr, nothing);
    waiting = true;
    for (;;) pause();
  }).detach();
  const timespec ms{0, 1000 * 1000};
  while (!waiting) nanosleep(&ms, nullptr);
  int device = 0;
  cudaGetDevice_v3020_params get{&device};
  api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0xE0001000u, get, 0, nullptr,
           nothing);
  return 0;
}

}  // namespace

int main() {
  const char* library = std::getenv("CUDA_INJECTION64_PATH");
  if (!library) {
    std::fprintf(stderr, "cupti_fake_app: CUDA_INJECTION64_PATH is not set\n");
    return 2;
  }
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::fprintf(stderr, "cupti_fake_app: %s\n", dlerror());
    return 2;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(handle, "InitializeInjection"));
  if (!init) {
    std::fprintf(stderr, "cupti_fake_app: no InitializeInjection in %s\n", library);
    return 2;
  }
  init();
  g_records = reinterpret_cast<unsigned long long (*)()>(dlsym(handle, "cudatrace_records"));
  if (std::getenv("FAKE_APP_CHECK_PAUSE")) {
    auto pause = reinterpret_cast<int (*)(int)>(dlsym(handle, "cudatrace_pause"));
    if (!pause) {
      std::fprintf(stderr, "cupti_fake_app: no cudatrace_pause in %s\n", library);
      return 2;
    }
    const int before = fake_cupti_enabled();
    const int paused_rc = pause(1);
    const int paused = fake_cupti_enabled();
    const int resumed_rc = pause(0);
    std::printf("pause %d %d %d\n", before, paused, fake_cupti_enabled());
    return paused_rc == 0 && resumed_rc == 1 ? 0 : 1;  // each returns the state before: live, then paused
  }
  g_callback = fake_cupti_callback(&g_userdata);
  if (!g_callback) return 0;  // the library stood aside (CUPTI taken): run on, untraced
  if (const char* live = std::getenv("FAKE_APP_LIVE_AT_EXIT")) return live_at_exit(std::strtoull(live, nullptr, 10));
  if (const char* loop = std::getenv("FAKE_APP_LOOP")) {
    const char* threads = std::getenv("FAKE_APP_THREADS");
    const int rc = run_loop(std::strtoull(loop, nullptr, 10), threads ? std::strtoull(threads, nullptr, 10) : 1);
    return g_records_wrong ? 5 : rc;
  }

  void* device_ptr = nullptr;
  cudaMalloc_v3020_params malloc_params{&device_ptr, 4096};
  api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 1, malloc_params, 0, nullptr,
           [&] { device_ptr = reinterpret_cast<void*>(0xdead000); });

  cudaMemcpy_v3020_params copy_params{reinterpret_cast<void*>(0x1000), reinterpret_cast<const void*>(0x2000), 64,
                                      cudaMemcpyHostToDevice};
  api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 2, copy_params, 1, nullptr, nothing);

  const void* stub = reinterpret_cast<const void*>(0x4242);
  cudaLaunchKernel_v7000_params launch{stub, dim3(4, 2, 1), dim3(256, 1, 1), nullptr, 0, nullptr};
  cuLaunchKernel_params driver_launch{reinterpret_cast<CUfunction>(0x5151), 4, 2, 1, 256, 1, 1, 0, nullptr, nullptr,
                                      nullptr};
  api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 3, launch, 0,
           "fake_kernel", [&] {
             api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 3, driver_launch, 0,
                      "fake_kernel", nothing);
           });
  CUpti_ActivityKernel10 kernel{};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.correlationId = 3;
  kernel.start = 1000;
  kernel.end = 3500;
  kernel.gridX = 4, kernel.gridY = 2, kernel.gridZ = 1;
  kernel.blockX = 256, kernel.blockY = 1, kernel.blockZ = 1;
  kernel.streamId = 7;
  kernel.deviceId = 1;
  kernel.name = "fake_kernel";
  fake_cupti_add_kernel(&kernel);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);

  pid_t child = fork();
  if (child == 0) {
    g_context = nullptr;
    int device = -1;
    cudaGetDevice_v3020_params get_params{&device};
    api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 4, get_params, 0, nullptr,
             [&] { device = 0; });
    std::exit(0);  // through atexit, as a program's own exit: the library's summary
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
