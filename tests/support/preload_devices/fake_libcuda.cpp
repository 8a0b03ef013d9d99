// A libcuda.so.1 for the preload shim's device tests, without a GPU: four devices, one
// context each, a current context per thread. It counts how often cuCtxGetCurrent is
// asked (the shim asks it directly, through its own dlsym of this library), and offers
// fake_make_current(), which makes a context current without any cu* entry point: the
// way cudart makes its primary context current through the driver's private tables,
// which the shim never sees.
#include <atomic>
#include <cstdio>

namespace {
constexpr int kDevices = 4;
int g_contexts[kDevices];  // a context is the address of its device's slot
thread_local int* t_current = nullptr;
std::atomic<long> g_get_current_calls{0};

int device_of(const int* context) { return int(context - g_contexts); }
}  // namespace

extern "C" {

int cuInit(unsigned) { return 0; }

int cuCtxGetCurrent(void** context) {
  g_get_current_calls.fetch_add(1);
  *context = t_current;
  return 0;
}

int cuCtxGetDevice(int* device) {
  if (!t_current) return 201;  // CUDA_ERROR_INVALID_CONTEXT
  *device = device_of(t_current);
  return 0;
}

int cuDeviceGetPCIBusId(char* id, int len, int device) {
  if (device < 0 || device >= kDevices) return 101;  // CUDA_ERROR_INVALID_DEVICE
  std::snprintf(id, size_t(len), "0000:%02x:00.0", 0x10 + device);
  return 0;
}

int cuDevicePrimaryCtxRetain(void** context, int device) {
  if (device < 0 || device >= kDevices) return 101;
  *context = &g_contexts[device];
  return 0;
}

int cuCtxSetCurrent(void* context) {
  t_current = static_cast<int*>(context);
  return 0;
}

// Two listed driver calls that need a context.
int cuEventRecord(void*, void*) { return t_current ? 0 : 201; }
int cuStreamSynchronize(void*) { return t_current ? 0 : 201; }
// A listed launch, for the per-call cost benchmark (tests/bench/preload_call_cost.cpp).
int cuLaunchKernel(void* f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                   void**) {
  return !t_current ? 201 : f ? 0 : 400;
}

// Not CUDA: for the fake cudart and the test program.
long fake_get_current_calls() { return g_get_current_calls.load(); }
void fake_make_current(int device) { t_current = device < 0 ? nullptr : &g_contexts[device]; }
int fake_current_device() { return t_current ? device_of(t_current) : -1; }
}
