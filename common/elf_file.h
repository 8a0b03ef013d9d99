#pragma once
// What the harness and the uprobe method read from ELF files: the libraries an executable
// asks for and where it asks the loader to look (to tell how it links the CUDA runtime,
// and to find the library the target will really load), and function symbols with the
// file offsets a uprobe is attached at.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace cudatrace {

struct DynamicInfo {
  std::vector<std::string> needed;   // DT_NEEDED, in order
  std::vector<std::string> rpath;    // DT_RPATH, split at ':' ($ORIGIN left as written)
  std::vector<std::string> runpath;  // DT_RUNPATH, split at ':'
};

// Empty when the file is not a 64-bit ELF or has no dynamic section (static binary).
// Like every reader here but read_elf_bytes, it reads headers and the tables it needs
// with pread, never a whole file (a library can weigh gigabytes). The fd forms read a
// file already open (a file another process mapped, opened through /proc).
DynamicInfo dynamic_info(const std::filesystem::path& elf);
DynamicInfo dynamic_info(int fd);
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
// `keep`: only names it accepts (null: all), asked before any string is made.
std::vector<FunctionSymbol> function_symbols(int fd, bool with_local, std::string& error,
                                             bool (*keep)(std::string_view) = nullptr);

// cudart's API is among these symbols (cudaGetDeviceCount, cudaMalloc or cudaLaunchKernel
// defined): a libcudart, or a file with cudart linked in statically that kept its symbols.
bool has_cudart_api(const std::vector<FunctionSymbol>& symbols);

// PT_INTERP: the dynamic loader the executable asks for (empty: a static executable).
std::string program_interpreter(const std::filesystem::path& elf);
// The value (address relative to the load base) of the defined symbol `name`, of any
// type, from .dynsym or .symtab; 0 when absent.
uint64_t symbol_value(const std::filesystem::path& elf, std::string_view name);

// Whether section `section` (".rodata") of the ELF file holds every one of `needles`.
bool section_contains(int fd, const char* section, const std::vector<std::string_view>& needles);
// Whether the file has a non-empty section of that name (e.g. ".nv_fatbin": CUDA kernels).
bool has_section(int fd, const char* section);

// The NUL-terminated string at virtual address `vaddr` of the file (any loadable segment);
// empty when there is none. The _of form works on bytes read once with read_elf_bytes.
std::string string_at_vaddr(const std::filesystem::path& elf, uint64_t vaddr);
std::string read_elf_bytes(const std::filesystem::path& elf);
std::string string_at_vaddr_of(const std::string& elf_bytes, uint64_t vaddr);

// A 64-bit ELF file, judged from its first bytes (without reading the rest).
bool is_elf64(const std::filesystem::path& file);

}  // namespace cudatrace
