#include "common/elf_file.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

namespace cudatrace {

namespace {

bool read_file(const std::filesystem::path& p, std::string& out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  out.assign(std::istreambuf_iterator<char>(f), {});
  return true;
}

template <class T>
bool view(const std::string& data, uint64_t off, T& out) {
  if (off > data.size() || data.size() - off < sizeof(T)) return false;
  std::memcpy(&out, data.data() + off, sizeof(T));
  return true;
}

// The whole file and its header, when it is a 64-bit ELF.
bool open_elf64(const std::filesystem::path& elf, std::string& data, Elf64_Ehdr& eh) {
  return read_file(elf, data) && view(data, 0, eh) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
         eh.e_ident[EI_CLASS] == ELFCLASS64;
}

std::string string_at(const std::string& data, const Elf64_Shdr& strtab, uint64_t index) {
  uint64_t s = strtab.sh_offset + index;
  if (index >= strtab.sh_size || s >= data.size()) return {};
  return std::string(data.c_str() + s, strnlen(data.c_str() + s, data.size() - s));
}

std::vector<std::string> split_paths(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

DynamicInfo dynamic_info(const std::filesystem::path& elf) {
  DynamicInfo info;
  std::string data;
  Elf64_Ehdr eh;
  if (!open_elf64(elf, data, eh)) return info;
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr dyn, strtab;
    if (!view(data, eh.e_shoff + uint64_t(i) * eh.e_shentsize, dyn) || dyn.sh_type != SHT_DYNAMIC) continue;
    if (!view(data, eh.e_shoff + uint64_t(dyn.sh_link) * eh.e_shentsize, strtab)) return info;
    for (uint64_t off = dyn.sh_offset; off + sizeof(Elf64_Dyn) <= dyn.sh_offset + dyn.sh_size; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      if (!view(data, off, d) || d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_NEEDED) info.needed.push_back(string_at(data, strtab, d.d_un.d_val));
      if (d.d_tag == DT_RPATH) info.rpath = split_paths(string_at(data, strtab, d.d_un.d_val));
      if (d.d_tag == DT_RUNPATH) info.runpath = split_paths(string_at(data, strtab, d.d_un.d_val));
    }
  }
  return info;
}

std::vector<std::string> needed_libraries(const std::filesystem::path& elf) { return dynamic_info(elf).needed; }

std::string cudart_linkage(const std::filesystem::path& elf) {
  std::ifstream probe(elf, std::ios::binary);
  if (!probe) return "unknown";
  for (const auto& lib : needed_libraries(elf))
    if (lib.rfind("libcudart.so", 0) == 0) return "shared";
  // Static cudart leaves its API functions in the executable (as local symbols).
  std::string error;
  for (const auto& f : function_symbols(elf, true, error))
    if (f.name == "cudaGetDeviceCount" || f.name == "cudaMalloc" || f.name == "cudaLaunchKernel") return "static";
  return "none";
}

std::vector<FunctionSymbol> function_symbols(const std::filesystem::path& elf, bool with_local, std::string& error) {
  std::vector<FunctionSymbol> out;
  std::string data;
  Elf64_Ehdr eh;
  if (!open_elf64(elf, data, eh)) {
    error = "not a readable 64-bit ELF file";
    return out;
  }
  // Virtual address -> file offset, through the loadable segments.
  std::vector<Elf64_Phdr> loads;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (view(data, eh.e_phoff + uint64_t(i) * eh.e_phentsize, ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
      loads.push_back(ph);
  }
  std::set<std::string> seen;
  for (uint32_t want : {uint32_t(SHT_DYNSYM), uint32_t(SHT_SYMTAB)}) {
    for (unsigned i = 0; i < eh.e_shnum; ++i) {
      Elf64_Shdr sh, strtab;
      if (!view(data, eh.e_shoff + uint64_t(i) * eh.e_shentsize, sh) || sh.sh_type != want || !sh.sh_entsize) continue;
      if (!view(data, eh.e_shoff + uint64_t(sh.sh_link) * eh.e_shentsize, strtab)) continue;
      for (uint64_t off = sh.sh_offset; off + sizeof(Elf64_Sym) <= sh.sh_offset + sh.sh_size; off += sh.sh_entsize) {
        Elf64_Sym s;
        if (!view(data, off, s) || ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF || !s.st_value)
          continue;
        const bool local = ELF64_ST_BIND(s.st_info) == STB_LOCAL;
        if (local && !with_local) continue;
        std::string name = string_at(data, strtab, s.st_name);
        if (auto at = name.find('@'); at != std::string::npos) name.resize(at);
        if (name.empty() || !seen.insert(name).second) continue;
        for (const auto& ph : loads) {
          if (s.st_value >= ph.p_vaddr && s.st_value < ph.p_vaddr + ph.p_filesz) {
            out.push_back({name, s.st_value - ph.p_vaddr + ph.p_offset, s.st_value, local});
            break;
          }
        }
      }
    }
  }
  if (out.empty()) error = "no function symbols (stripped?)";
  return out;
}

std::string read_elf_bytes(const std::filesystem::path& elf) {
  std::string data;
  return read_file(elf, data) ? data : std::string();
}

std::string string_at_vaddr_of(const std::string& data, uint64_t vaddr) {
  Elf64_Ehdr eh;
  if (!view(data, 0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return {};
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!view(data, eh.e_phoff + uint64_t(i) * eh.e_phentsize, ph) || ph.p_type != PT_LOAD) continue;
    if (vaddr < ph.p_vaddr || vaddr >= ph.p_vaddr + ph.p_filesz) continue;
    const uint64_t off = vaddr - ph.p_vaddr + ph.p_offset;
    if (off >= data.size()) return {};
    return std::string(data.c_str() + off, strnlen(data.c_str() + off, data.size() - off));
  }
  return {};
}

std::string string_at_vaddr(const std::filesystem::path& elf, uint64_t vaddr) {
  return string_at_vaddr_of(read_elf_bytes(elf), vaddr);
}

bool is_elf64(const std::filesystem::path& file) {
  std::ifstream f(file, std::ios::binary);
  unsigned char ident[EI_NIDENT] = {};
  return f.read(reinterpret_cast<char*>(ident), sizeof ident) && std::memcmp(ident, ELFMAG, SELFMAG) == 0 &&
         ident[EI_CLASS] == ELFCLASS64;
}

}  // namespace cudatrace
