#pragma once
// The Compute Sanitizer functions the injection library calls, found at run time in the
// libsanitizer-public.so the harness names (CUDATRACE_SANITIZER_LIB): the library itself
// links none, so it loads on any host, and a host whose toolkit keeps the sanitizer
// elsewhere is served by `--set sanitizer.lib=PATH`.
#include <sanitizer.h>

#include <string>

namespace cudatrace::sanitizer {

struct SanitizerApi {
  decltype(&::sanitizerSubscribe) subscribe = nullptr;
  decltype(&::sanitizerUnsubscribe) unsubscribe = nullptr;
  decltype(&::sanitizerEnableCallback) enable_callback = nullptr;
  decltype(&::sanitizerAddPatches) add_patches = nullptr;
  decltype(&::sanitizerPatchInstructions) patch_instructions = nullptr;
  decltype(&::sanitizerPatchModule) patch_module = nullptr;
  decltype(&::sanitizerSetLaunchCallbackData) set_launch_data = nullptr;
  decltype(&::sanitizerSetCallbackData) set_function_data = nullptr;
  decltype(&::sanitizerAlloc) alloc = nullptr;
  decltype(&::sanitizerFree) free = nullptr;
  decltype(&::sanitizerMemset) memset = nullptr;
  decltype(&::sanitizerMemcpyDeviceToHost) copy_to_host = nullptr;
  decltype(&::sanitizerStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::sanitizerGetStreamHandle) stream_handle = nullptr;
  decltype(&::sanitizerGetResultString) result_string = nullptr;
};

// Loads `path` and every function above; false with the reason in `why` when the library
// or one of its functions is missing.
bool load_sanitizer_api(const char* path, SanitizerApi& api, std::string& why);

// "SANITIZER_ERROR_INVALID_PARAMETER (1)"-like text for a result.
std::string describe(const SanitizerApi& api, SanitizerResult r);

}  // namespace cudatrace::sanitizer
