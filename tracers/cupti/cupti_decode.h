#pragma once
// The cupti method's records (tracers/cupti/cupti_event.h) -> the common event record: API calls on
// the runtime and driver layers, kernel activity on the gpu-activity layer, each kernel
// joined to the call that launched it by CUPTI's correlation id.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tracers/cupti/cupti_event.h"
#include "common/event.h"

namespace cudatrace {

// CUPTI's callback domains (CUpti_CallbackDomain) that the library subscribes to.
inline constexpr uint32_t kCuptiDriverDomain = 1;
inline constexpr uint32_t kCuptiRuntimeDomain = 2;

// The function CUPTI reports as (domain, cbid): "cudaMemcpyAsync_ptsz", "cuMemAlloc_v2".
// The runtime ids' ABI suffix (_v3020, _v7000, ...) is dropped; it is CUPTI's, not the
// symbol's. Unknown ids give "cbid:<domain>:<id>".
std::string cupti_callback_name(uint32_t domain, uint32_t cbid);

struct CuptiDecodeStats {
  int64_t records = 0;
  int64_t api_calls = 0;
  int64_t kernels = 0;
  int64_t kernels_joined = 0;       // kernel records whose correlation id named a traced launch
  int64_t unknown_callbacks = 0;    // API records of an id this build has no name for
  int64_t activity_dropped = 0;     // what CUPTI said it dropped
  bool loaded = false;              // the library reported in (status LOADED)
  int64_t loaded_ns = 0;            // when: calls that began earlier cannot be seen
  std::string mode;                 // "full" or "bare", as the library said
  uint64_t cupti_version = 0;
  std::vector<std::string> problems;  // subscriber taken, CUPTI errors: one line each
  bool summary = false;             // the library's exit summary arrived
  uint64_t library_api_exits = 0, library_kernels = 0;  // what the library said it emitted
  int64_t devices_named = 0;        // (process, device) pairs whose bus id the library sent
};

std::vector<Event> decode_cupti_records(const std::vector<cupti_record>& records, CuptiDecodeStats& stats);

}  // namespace cudatrace
