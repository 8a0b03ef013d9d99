#pragma once
// The shared libraries an ELF executable asks for (DT_NEEDED), to tell how an arbitrary
// program links the CUDA runtime.
#include <filesystem>
#include <string>
#include <vector>

namespace cudatrace {

// Empty when the file is not a 64-bit ELF or has no dynamic section (static binary).
std::vector<std::string> needed_libraries(const std::filesystem::path& elf);

// "shared" when it needs libcudart.so*, "static" when not (cudart linked in, or no CUDA
// at all: we cannot tell those apart without symbols), "unknown" when unreadable.
std::string cudart_linkage(const std::filesystem::path& elf);

}  // namespace cudatrace
