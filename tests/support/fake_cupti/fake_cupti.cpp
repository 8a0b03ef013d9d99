// A stand-in for libcupti.so.13, for testing the injection library where there is no GPU
// (CI): the CUPTI functions the library calls, answering as CUPTI would, plus a few fake_*
// entry points through which a test program plays CUPTI's part (calls the subscriber's
// callback, produces kernel activity records). Environment:
//   FAKE_CUPTI_TAKEN=name   cuptiSubscribe_v2 fails: `name` already holds the subscriber
//   FAKE_CUPTI_DROPPED=n    the first completed buffer reports n dropped records
#include <cupti.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

CUpti_CallbackFunc g_callback = nullptr;
void* g_userdata = nullptr;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
std::vector<CUpti_ActivityKernel10> g_pending;
size_t g_dropped_once = 0;
bool g_domain_enabled[8] = {};  // by CUpti_CallbackDomain
bool g_kernel_activity = false;
bool g_runtime_activity = false, g_driver_activity = false;

bool* activity_flag(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return &g_kernel_activity;
    case CUPTI_ACTIVITY_KIND_RUNTIME: return &g_runtime_activity;
    case CUPTI_ACTIVITY_KIND_DRIVER: return &g_driver_activity;
    default: return nullptr;
  }
}

}  // namespace

extern "C" {

CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                              CUpti_SubscriberParams* params) {
  if (const char* holder = std::getenv("FAKE_CUPTI_TAKEN")) {
    if (params && params->oldSubscriberName && params->oldSubscriberSize > 0) {
      std::strncpy(params->oldSubscriberName, holder, params->oldSubscriberSize - 1);
      params->oldSubscriberName[params->oldSubscriberSize - 1] = 0;
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  g_callback = callback;
  g_userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_callback);
  if (const char* d = std::getenv("FAKE_CUPTI_DROPPED")) g_dropped_once = std::strtoull(d, nullptr, 10);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  g_callback = nullptr;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain) {
  if (unsigned(domain) >= 8) return CUPTI_ERROR_INVALID_PARAMETER;
  g_domain_enabled[domain] = enable != 0;
  return CUPTI_SUCCESS;
}

// The fake app's contexts are small numbers: context N is on device N - 1.
CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t* device) {
  const auto n = reinterpret_cast<uintptr_t>(context);
  if (n == 0 || n > 16) return CUPTI_ERROR_INVALID_CONTEXT;
  *device = uint32_t(n - 1);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetVersion(uint32_t* version) {
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult, const char** str) {
  *str = "fake CUPTI error";
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc) { return CUPTI_SUCCESS; }

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete) {
  g_request = request;
  g_complete = complete;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  if (bool* on = activity_flag(kind)) *on = true;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  if (bool* on = activity_flag(kind)) *on = false;
  return CUPTI_SUCCESS;
}

// Records are laid out back to back, each a CUpti_ActivityKernel10.
CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  uint8_t* next = *record ? reinterpret_cast<uint8_t*>(*record) + sizeof(CUpti_ActivityKernel10) : buffer;
  if (next + sizeof(CUpti_ActivityKernel10) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = g_dropped_once;
  g_dropped_once = 0;
  return CUPTI_SUCCESS;
}

// Hands every pending kernel record over in one buffer, as CUPTI does on a flush.
CUptiResult cuptiActivityFlushAll(uint32_t) {
  if (!g_request || !g_complete || g_pending.empty()) return CUPTI_SUCCESS;
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  g_request(&buffer, &size, &max_records);
  const size_t bytes = g_pending.size() * sizeof(CUpti_ActivityKernel10);
  if (!buffer || size < bytes) return CUPTI_ERROR_INVALID_PARAMETER;
  std::memcpy(buffer, g_pending.data(), bytes);
  g_pending.clear();
  g_complete(nullptr, 0, buffer, size, bytes);
  return CUPTI_SUCCESS;
}

// ---- the test program's side ----
CUpti_CallbackFunc fake_cupti_callback(void** userdata) {
  *userdata = g_userdata;
  return g_callback;
}

void fake_cupti_add_kernel(const CUpti_ActivityKernel10* k) { g_pending.push_back(*k); }

// What the subscriber has switched on: bit 0 runtime callbacks, bit 1 driver callbacks,
// bit 2 kernel activity, bit 3 runtime API activity, bit 4 driver API activity.
int fake_cupti_enabled() {
  return int(g_domain_enabled[CUPTI_CB_DOMAIN_RUNTIME_API]) | int(g_domain_enabled[CUPTI_CB_DOMAIN_DRIVER_API]) << 1 |
         int(g_kernel_activity) << 2 | int(g_runtime_activity) << 3 | int(g_driver_activity) << 4;
}

}  // extern "C"
