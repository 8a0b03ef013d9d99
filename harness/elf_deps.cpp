#include "harness/elf_deps.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>

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

}  // namespace

std::vector<std::string> needed_libraries(const std::filesystem::path& elf) {
  std::vector<std::string> out;
  std::string data;
  Elf64_Ehdr eh;
  if (!read_file(elf, data) || !view(data, 0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64)
    return out;
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr dyn;
    if (!view(data, eh.e_shoff + uint64_t(i) * eh.e_shentsize, dyn) || dyn.sh_type != SHT_DYNAMIC) continue;
    Elf64_Shdr strtab;
    if (!view(data, eh.e_shoff + uint64_t(dyn.sh_link) * eh.e_shentsize, strtab)) return out;
    for (uint64_t off = dyn.sh_offset; off + sizeof(Elf64_Dyn) <= dyn.sh_offset + dyn.sh_size; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      if (!view(data, off, d) || d.d_tag == DT_NULL) break;
      if (d.d_tag != DT_NEEDED) continue;
      uint64_t s = strtab.sh_offset + d.d_un.d_val;
      if (s >= data.size()) continue;
      out.emplace_back(data.c_str() + s, strnlen(data.c_str() + s, data.size() - s));
    }
  }
  return out;
}

std::string cudart_linkage(const std::filesystem::path& elf) {
  std::ifstream probe(elf, std::ios::binary);
  if (!probe) return "unknown";
  for (const auto& lib : needed_libraries(elf))
    if (lib.rfind("libcudart.so", 0) == 0) return "shared";
  return "static";
}

}  // namespace cudatrace
