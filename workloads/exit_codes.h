#pragma once
// How a workload ends: the workloads exit with these, the harness explains them.
// No CUDA includes: the harness reads this too.
namespace workload {

inline constexpr int kOk = 0;
inline constexpr int kWrongResult = 1;  // the GPU computed something wrong
inline constexpr int kUsage = 2;        // bad flags
inline constexpr int kCudaFailed = 3;   // a call that must succeed failed (no GPU, OOM, ...)

}  // namespace workload
