#include <gtest/gtest.h>

#include "harness/elf_deps.h"

using namespace cudatrace;

// The workload binaries of this build are the reference: one of each linkage.
TEST(ElfDeps, SharedCudartIsANeededLibrary) {
  const std::string dir = CUDATRACE_WORKLOAD_DIR;
  auto needed = needed_libraries(dir + "/errors.shared");
  bool has_cudart = false;
  for (const auto& lib : needed) has_cudart = has_cudart || lib.rfind("libcudart.so", 0) == 0;
  EXPECT_TRUE(has_cudart);
  EXPECT_EQ(cudart_linkage(dir + "/errors.shared"), "shared");
  EXPECT_EQ(cudart_linkage(dir + "/errors.static"), "static");
  EXPECT_FALSE(needed_libraries(dir + "/errors.static").empty());  // libc at least
}

TEST(ElfDeps, NotAnElfIsNoLibrariesAndUnreadableIsUnknown) {
  EXPECT_TRUE(needed_libraries(CUDATRACE_SCHEMA_FILE).empty());
  EXPECT_EQ(cudart_linkage("/no/such/file"), "unknown");
}
