#include "tracers/sanitizer/injection/sanitizer_api.h"

#include <dlfcn.h>

namespace cudatrace::sanitizer {

namespace {

template <typename F>
bool bind(void* handle, const char* name, F& into, std::string& why) {
  into = reinterpret_cast<F>(dlsym(handle, name));
  if (!into) why = std::string("the sanitizer library has no ") + name + " (a toolkit older than this build's?)";
  return into != nullptr;
}

}  // namespace

bool load_sanitizer_api(const char* path, SanitizerApi& api, std::string& why) {
  if (!path || !*path) {
    why = "no sanitizer library named (CUDATRACE_SANITIZER_LIB is unset)";
    return false;
  }
  // RTLD_LOCAL: the program never sees these symbols; RTLD_NODELETE: callbacks may still
  // arrive from driver threads while the process ends.
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    const char* err = dlerror();
    why = std::string("cannot load ") + path + ": " + (err ? err : "unknown error");
    return false;
  }
  return bind(handle, "sanitizerSubscribe", api.subscribe, why) &&
         bind(handle, "sanitizerUnsubscribe", api.unsubscribe, why) &&
         bind(handle, "sanitizerEnableCallback", api.enable_callback, why) &&
         bind(handle, "sanitizerAddPatches", api.add_patches, why) &&
         bind(handle, "sanitizerPatchInstructions", api.patch_instructions, why) &&
         bind(handle, "sanitizerPatchModule", api.patch_module, why) &&
         bind(handle, "sanitizerSetLaunchCallbackData", api.set_launch_data, why) &&
         bind(handle, "sanitizerSetCallbackData", api.set_function_data, why) &&
         bind(handle, "sanitizerAlloc", api.alloc, why) && bind(handle, "sanitizerFree", api.free, why) &&
         bind(handle, "sanitizerMemset", api.memset, why) &&
         bind(handle, "sanitizerMemcpyDeviceToHost", api.copy_to_host, why) &&
         bind(handle, "sanitizerStreamSynchronize", api.stream_synchronize, why) &&
         bind(handle, "sanitizerGetStreamHandle", api.stream_handle, why) &&
         bind(handle, "sanitizerGetResultString", api.result_string, why);
}

std::string describe(const SanitizerApi& api, SanitizerResult r) {
  const char* text = nullptr;
  if (api.result_string && api.result_string(r, &text) == SANITIZER_SUCCESS && text)
    return std::string(text) + " (" + std::to_string(int(r)) + ")";
  return "sanitizer result " + std::to_string(int(r));
}

}  // namespace cudatrace::sanitizer
