#pragma once
// What the harness and the uprobe method read from ELF files: the libraries an executable
// asks for and where it asks the loader to look (to tell how it links the CUDA runtime,
// and to find the library the target will really load), and function symbols with the
// file offsets a uprobe is attached at.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cudatrace {

struct DynamicInfo {
  std::vector<std::string> needed;   // DT_NEEDED, in order
  std::vector<std::string> rpath;    // DT_RPATH, split at ':' ($ORIGIN left as written)
  std::vector<std::string> runpath;  // DT_RUNPATH, split at ':'
};

// Empty when the file is not a 64-bit ELF or has no dynamic section (static binary).
DynamicInfo dynamic_info(const std::filesystem::path& elf);
std::vector<std::string> needed_libraries(const std::filesystem::path& elf);

// "shared" when it needs libcudart.so*, "static" when cudart's functions are in its symbol
// table, "none" otherwise (no cudart at start: a Python interpreter, a program that
// dlopens it, or a stripped static binary), "unknown" when unreadable.
std::string cudart_linkage(const std::filesystem::path& elf);

struct FunctionSymbol {
  std::string name;      // without a @VERSION suffix
  uint64_t file_offset;  // where the code lies in the file: what a uprobe is attached at
  uint64_t vaddr;        // st_value: the address relative to the load base
  bool local;            // from .symtab with STB_LOCAL binding
};

// Defined functions from .dynsym and .symtab (local ones too, when `with_local`),
// one entry per name. Empty with `error` set when the file cannot be read as ELF64.
std::vector<FunctionSymbol> function_symbols(const std::filesystem::path& elf, bool with_local, std::string& error);

// The NUL-terminated string at virtual address `vaddr` of the file (any loadable segment);
// empty when there is none. The _of form works on bytes read once with read_elf_bytes.
std::string string_at_vaddr(const std::filesystem::path& elf, uint64_t vaddr);
std::string read_elf_bytes(const std::filesystem::path& elf);
std::string string_at_vaddr_of(const std::string& elf_bytes, uint64_t vaddr);

// A 64-bit ELF file, judged from its first bytes (without reading the rest).
bool is_elf64(const std::filesystem::path& file);

}  // namespace cudatrace
