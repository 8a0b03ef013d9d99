#pragma once
// A runtime call's name from its CUPTI callback id, for the calls Kineto could not name.
#include <cstdint>

namespace cudatrace {

// "cudaStreamGetCaptureInfo_v12030" for 461, as CUPTI names it (its version suffix on);
// nullptr for an id CUDA 13.0 does not have.
const char* runtime_cbid_name(int64_t cbid);

}  // namespace cudatrace
