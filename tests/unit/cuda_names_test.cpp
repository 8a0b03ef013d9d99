#include <gtest/gtest.h>

#include "common/cuda_names.h"

using namespace cudatrace;

TEST(CudaNames, FamiliesFoldToOneName) {
  EXPECT_EQ(canonical_name("cuMemAlloc_v2"), "cuMemAlloc");
  EXPECT_EQ(canonical_name("cudaMemcpyAsync_ptsz"), "cudaMemcpyAsync");
  EXPECT_EQ(canonical_name("cudaMemcpy_ptds"), "cudaMemcpy");
  EXPECT_EQ(canonical_name("cuLaunchKernel_ptsz"), "cuLaunchKernel");
  EXPECT_EQ(canonical_name("cuMemcpyHtoDAsync_v2_ptsz"), "cuMemcpyHtoDAsync");
  EXPECT_EQ(canonical_name("__cudaLaunchKernel"), "cudaLaunchKernel");
  EXPECT_EQ(canonical_name("__cudaLaunchKernel_ptsz"), "cudaLaunchKernel");
  EXPECT_EQ(canonical_name("cudaLaunchKernelExC"), "cudaLaunchKernelExC");
  EXPECT_EQ(canonical_name("cuCtxCreate_v4"), "cuCtxCreate");
  EXPECT_EQ(canonical_name("cudaGetDevice"), "cudaGetDevice");
}

TEST(CudaNames, CudartPlumbingIsInternalButLaunchIsNot) {
  EXPECT_TRUE(is_runtime_internal("__cudaRegisterFatBinary"));
  EXPECT_TRUE(is_runtime_internal("__cudaPushCallConfiguration"));
  EXPECT_TRUE(is_runtime_internal("__cudaPopCallConfiguration"));
  EXPECT_FALSE(is_runtime_internal("__cudaLaunchKernel"));
  EXPECT_FALSE(is_runtime_internal("__cudaLaunchKernel_ptsz"));
  EXPECT_FALSE(is_runtime_internal("cudaMalloc"));
}

TEST(CudaNames, LaunchFamilies) {
  EXPECT_TRUE(is_runtime_launch(canonical_name("__cudaLaunchKernel")));
  EXPECT_TRUE(is_runtime_launch("cudaLaunchKernelExC"));
  EXPECT_FALSE(is_runtime_launch("cudaMemcpy"));
  EXPECT_TRUE(is_driver_launch(canonical_name("cuLaunchKernel_ptsz")));
  EXPECT_TRUE(is_driver_launch("cuLaunchKernelEx"));
  EXPECT_FALSE(is_driver_launch("cuModuleGetFunction"));
}
