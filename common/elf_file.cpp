#include "common/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

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

// The most of one section read into memory (a symbol or string table): libraries of
// gigabytes (cuBLAS, a framework's CUDA kernels) are read a table at a time, never whole.
constexpr uint64_t kMaxSectionBytes = uint64_t(256) << 20;

// An ELF64 file read through its descriptor with pread: the headers at open, sections on
// request.
class ElfFd {
 public:
  explicit ElfFd(int fd) : fd_(fd) {
    if (!read_at(0, eh_) || std::memcmp(eh_.e_ident, ELFMAG, SELFMAG) != 0 || eh_.e_ident[EI_CLASS] != ELFCLASS64)
      return;
    if (eh_.e_phentsize == sizeof(Elf64_Phdr) && eh_.e_phnum < 4096) {
      phdrs_.resize(eh_.e_phnum);
      if (!read_n(eh_.e_phoff, phdrs_.data(), phdrs_.size() * sizeof(Elf64_Phdr))) phdrs_.clear();
    }
    if (eh_.e_shentsize == sizeof(Elf64_Shdr) && eh_.e_shnum < 65535) {
      shdrs_.resize(eh_.e_shnum);
      if (!read_n(eh_.e_shoff, shdrs_.data(), shdrs_.size() * sizeof(Elf64_Shdr))) shdrs_.clear();
    }
    ok_ = true;
  }
  bool ok() const { return ok_; }
  const std::vector<Elf64_Phdr>& phdrs() const { return phdrs_; }
  const std::vector<Elf64_Shdr>& shdrs() const { return shdrs_; }
  // Section i's bytes (empty: none, NOBITS, unreadable or over kMaxSectionBytes).
  std::string section(size_t i) const {
    std::string out;
    if (i >= shdrs_.size() || shdrs_[i].sh_type == SHT_NOBITS || shdrs_[i].sh_size > kMaxSectionBytes) return out;
    out.resize(shdrs_[i].sh_size);
    if (!read_n(shdrs_[i].sh_offset, out.data(), out.size())) out.clear();
    return out;
  }
  std::string section_name(size_t i) const {
    if (i >= shdrs_.size() || eh_.e_shstrndx >= shdrs_.size()) return {};
    if (names_.empty()) names_ = section(eh_.e_shstrndx);
    return c_string_at(names_, shdrs_[i].sh_name);
  }
  // Whether section `name` holds every one of `needles`, read in pieces.
  bool section_contains(const char* name, const std::vector<std::string_view>& needles) const {
    size_t longest = 0;
    for (auto n : needles) longest = std::max(longest, n.size());
    std::vector<bool> found(needles.size(), false);
    size_t missing = needles.size();
    for (size_t i = 0; i < shdrs_.size() && missing; ++i) {
      if (section_name(i) != name || shdrs_[i].sh_type == SHT_NOBITS) continue;
      constexpr uint64_t kPiece = 4 << 20;
      std::string buf(kPiece + longest, '\0');
      for (uint64_t at = 0; at < shdrs_[i].sh_size && missing; at += kPiece) {
        const uint64_t n = std::min<uint64_t>(kPiece + longest, shdrs_[i].sh_size - at);
        if (!read_n(shdrs_[i].sh_offset + at, buf.data(), n)) return false;
        const std::string_view piece(buf.data(), n);
        for (size_t k = 0; k < needles.size(); ++k)
          if (!found[k] && piece.find(needles[k]) != std::string_view::npos) found[k] = true, --missing;
      }
    }
    return missing == 0;
  }
  bool has_section(const char* name) const {
    for (size_t i = 0; i < shdrs_.size(); ++i)
      if (shdrs_[i].sh_size > 0 && section_name(i) == name) return true;
    return false;
  }
  static std::string c_string_at(const std::string& table, uint64_t index) {
    if (index >= table.size()) return {};
    return std::string(table.c_str() + index, strnlen(table.c_str() + index, table.size() - index));
  }

 private:
  template <class T>
  bool read_at(uint64_t off, T& out) const {
    return read_n(off, &out, sizeof out);
  }
  bool read_n(uint64_t off, void* out, size_t n) const {
    auto* p = static_cast<char*>(out);
    while (n) {
      const ssize_t got = pread(fd_, p, n, off_t(off));
      if (got <= 0) return false;
      p += got, off += uint64_t(got), n -= size_t(got);
    }
    return true;
  }
  int fd_;
  bool ok_ = false;
  Elf64_Ehdr eh_{};
  std::vector<Elf64_Phdr> phdrs_;
  std::vector<Elf64_Shdr> shdrs_;
  mutable std::string names_;
};

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

// Calls visit(sym, name) for each defined symbol of .dynsym, then .symtab, whose name
// passes `keep` (checked on the table's bytes, before any string is made: a framework's
// library has hundreds of thousands of names). `name` has no @VERSION. Returns false when a
// table was over kMaxSectionBytes (skipped).
template <class Visit>
bool for_each_symbol(const ElfFd& elf, bool (*keep)(std::string_view), Visit&& visit) {
  bool whole = true;
  for (uint32_t want : {uint32_t(SHT_DYNSYM), uint32_t(SHT_SYMTAB)}) {
    for (size_t i = 0; i < elf.shdrs().size(); ++i) {
      const Elf64_Shdr& sh = elf.shdrs()[i];
      if (sh.sh_type != want || sh.sh_entsize < sizeof(Elf64_Sym)) continue;
      const std::string syms = elf.section(i), strtab = elf.section(sh.sh_link);
      if (syms.empty() && sh.sh_size) whole = false;
      for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= syms.size(); off += sh.sh_entsize) {
        Elf64_Sym s;
        if (!view(syms, off, s) || s.st_shndx == SHN_UNDEF || !s.st_value || s.st_name >= strtab.size()) continue;
        std::string_view name(strtab.c_str() + s.st_name, strnlen(strtab.c_str() + s.st_name, strtab.size() - s.st_name));
        name = name.substr(0, name.find('@'));
        if (name.empty() || (keep && !keep(name))) continue;
        visit(s, name);
      }
    }
  }
  return whole;
}

// An fd for the path, closed when it goes out of scope.
struct FileFd {
  explicit FileFd(const std::filesystem::path& p) : fd(open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {}
  ~FileFd() {
    if (fd >= 0) close(fd);
  }
  FileFd(const FileFd&) = delete;
  FileFd& operator=(const FileFd&) = delete;
  int fd;
};

}  // namespace

DynamicInfo dynamic_info(int fd) {
  DynamicInfo info;
  ElfFd elf(fd);
  if (!elf.ok()) return info;
  for (size_t i = 0; i < elf.shdrs().size(); ++i) {
    if (elf.shdrs()[i].sh_type != SHT_DYNAMIC) continue;
    const std::string dyn = elf.section(i), strtab = elf.section(elf.shdrs()[i].sh_link);
    for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= dyn.size(); off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      if (!view(dyn, off, d) || d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_NEEDED) info.needed.push_back(ElfFd::c_string_at(strtab, d.d_un.d_val));
      if (d.d_tag == DT_RPATH) info.rpath = split_paths(ElfFd::c_string_at(strtab, d.d_un.d_val));
      if (d.d_tag == DT_RUNPATH) info.runpath = split_paths(ElfFd::c_string_at(strtab, d.d_un.d_val));
    }
  }
  return info;
}

DynamicInfo dynamic_info(const std::filesystem::path& elf) {
  FileFd f(elf);
  return f.fd < 0 ? DynamicInfo{} : dynamic_info(f.fd);
}

std::vector<std::string> needed_libraries(const std::filesystem::path& elf) { return dynamic_info(elf).needed; }

std::string cudart_linkage(const std::filesystem::path& elf) {
  std::ifstream probe(elf, std::ios::binary);
  if (!probe) return "unknown";
  for (const auto& lib : needed_libraries(elf))
    if (lib.rfind("libcudart.so", 0) == 0) return "shared";
  // Static cudart leaves its API functions in the executable (as local symbols).
  std::string error;
  if (has_cudart_api(function_symbols(elf, true, error))) return "static";
  return "none";
}

bool has_cudart_api(const std::vector<FunctionSymbol>& symbols) {
  for (const auto& f : symbols)
    if (f.name == "cudaGetDeviceCount" || f.name == "cudaMalloc" || f.name == "cudaLaunchKernel") return true;
  return false;
}

std::vector<FunctionSymbol> function_symbols(int fd, bool with_local, std::string& error,
                                             bool (*keep)(std::string_view)) {
  std::vector<FunctionSymbol> out;
  ElfFd elf(fd);
  if (!elf.ok()) {
    error = "not a readable 64-bit ELF file";
    return out;
  }
  // Virtual address -> file offset, through the executable loadable segments.
  std::vector<Elf64_Phdr> loads;
  for (const auto& ph : elf.phdrs())
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) loads.push_back(ph);
  std::set<std::string, std::less<>> seen;
  const bool whole = for_each_symbol(elf, keep, [&](const Elf64_Sym& s, std::string_view name) {
    const bool local = ELF64_ST_BIND(s.st_info) == STB_LOCAL;
    if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || (local && !with_local) || seen.count(name)) return;
    seen.emplace(name);
    for (const auto& ph : loads) {
      if (s.st_value >= ph.p_vaddr && s.st_value < ph.p_vaddr + ph.p_filesz) {
        out.push_back({std::string(name), s.st_value - ph.p_vaddr + ph.p_offset, s.st_value, local});
        break;
      }
    }
  });
  if (!whole) error = "a symbol table over " + std::to_string(kMaxSectionBytes >> 20) + " MiB";
  if (out.empty() && error.empty()) error = "no function symbols (stripped?)";
  return out;
}

std::vector<FunctionSymbol> function_symbols(const std::filesystem::path& elf, bool with_local, std::string& error) {
  FileFd f(elf);
  if (f.fd < 0) {
    error = std::string("cannot open: ") + std::strerror(errno);
    return {};
  }
  return function_symbols(f.fd, with_local, error);
}

std::string program_interpreter(const std::filesystem::path& elf) {
  FileFd f(elf);
  if (f.fd < 0) return {};
  ElfFd e(f.fd);
  for (const auto& ph : e.phdrs()) {
    if (ph.p_type != PT_INTERP || ph.p_filesz == 0 || ph.p_filesz > 4096) continue;
    std::string path(ph.p_filesz, '\0');
    if (pread(f.fd, path.data(), path.size(), off_t(ph.p_offset)) != ssize_t(path.size())) return {};
    path.resize(strnlen(path.c_str(), path.size()));
    return path;
  }
  return {};
}

uint64_t symbol_value(const std::filesystem::path& elf, std::string_view name) {
  FileFd f(elf);
  if (f.fd < 0) return 0;
  uint64_t value = 0;
  for_each_symbol(ElfFd(f.fd), nullptr, [&](const Elf64_Sym& s, std::string_view n) {
    if (!value && n == name) value = s.st_value;
  });
  return value;
}

bool section_contains(int fd, const char* section, const std::vector<std::string_view>& needles) {
  ElfFd elf(fd);
  return elf.ok() && elf.section_contains(section, needles);
}

bool has_section(int fd, const char* section) {
  ElfFd elf(fd);
  return elf.ok() && elf.has_section(section);
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
