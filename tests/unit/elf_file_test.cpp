#include <gtest/gtest.h>

#include "common/elf_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

using namespace cudatrace;

// The workload binaries of this build are the reference: one of each linkage.
TEST(ElfFile, SharedCudartIsANeededLibrary) {
  const std::string dir = CUDATRACE_WORKLOAD_DIR;
  auto needed = needed_libraries(dir + "/errors.shared");
  bool has_cudart = false;
  for (const auto& lib : needed) has_cudart = has_cudart || lib.rfind("libcudart.so", 0) == 0;
  EXPECT_TRUE(has_cudart);
  EXPECT_EQ(cudart_linkage(dir + "/errors.shared"), "shared");
  EXPECT_EQ(cudart_linkage(dir + "/errors.static"), "static");
  EXPECT_FALSE(needed_libraries(dir + "/errors.static").empty());  // libc at least
}

TEST(ElfFile, NotAnElfIsNoLibrariesAndUnreadableIsUnknown) {
  EXPECT_TRUE(needed_libraries(CUDATRACE_SCHEMA_FILE).empty());
  EXPECT_EQ(cudart_linkage("/no/such/file"), "unknown");
}

TEST(ElfFile, SharedWorkloadSaysWhereToFindCudart) {
  const DynamicInfo info = dynamic_info(std::string(CUDATRACE_WORKLOAD_DIR) + "/errors.shared");
  std::vector<std::string> dirs = info.runpath.empty() ? info.rpath : info.runpath;
  EXPECT_NE(std::find(dirs.begin(), dirs.end(), "/usr/local/cuda/lib64"), dirs.end());
}

// Static cudart's API functions are local symbols of the executable: only .symtab has them.
TEST(ElfFile, StaticCudartFunctionsAreLocalSymbols) {
  std::string error;
  const std::string exe = std::string(CUDATRACE_WORKLOAD_DIR) + "/errors.static";
  auto find = [](const std::vector<FunctionSymbol>& syms, const std::string& name) -> const FunctionSymbol* {
    for (const auto& s : syms)
      if (s.name == name) return &s;
    return nullptr;
  };
  auto all = function_symbols(exe, true, error);
  const FunctionSymbol* malloc_sym = find(all, "cudaMalloc");
  ASSERT_NE(malloc_sym, nullptr) << error;
  EXPECT_TRUE(malloc_sym->local);
  EXPECT_GT(malloc_sym->file_offset, 0u);
  EXPECT_LT(malloc_sym->file_offset, std::filesystem::file_size(exe));
  EXPECT_EQ(find(function_symbols(exe, false, error), "cudaMalloc"), nullptr);
}

TEST(ElfFile, NotAnElfHasNoSymbolsAndSaysWhy) {
  std::string error;
  EXPECT_TRUE(function_symbols(CUDATRACE_SCHEMA_FILE, true, error).empty());
  EXPECT_FALSE(error.empty());
}

// What devhook's agent asks of each library it finds loaded: kernels (a .nv_fatbin) and a
// cudart of its own (error names and the libcuda.so.1 it opens, in .rodata).
TEST(ElfFile, PrivateCudartLibraryHasKernelsAndCudartStrings) {
  auto check = [](const std::string& file, bool fatbin, bool cudart_strings) {
    const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << file;
    EXPECT_EQ(has_section(fd, ".nv_fatbin"), fatbin) << file;
    EXPECT_EQ(section_contains(fd, ".rodata", {"cudaErrorMissingConfiguration", "libcuda.so.1"}), cudart_strings)
        << file;
    close(fd);
  };
  const std::string dir = CUDATRACE_WORKLOAD_DIR;
  check(dir + "/libprivatert.so", true, true);
  check(dir + "/vecadd.shared", true, false);
  check(CUDATRACE_SCHEMA_FILE, false, false);  // not an ELF file
}
