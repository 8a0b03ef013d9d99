// What the shim does not cover in this process: the functions the loaded libcudart.so /
// libcuda export that the toolkit the shim was built against did not (a newer cudart or
// driver), and which loaded objects import one of them by name (linked against a newer
// toolkit): those calls bind straight to the library, unrecorded. Looked up through dlsym
// or cuGetProcAddress they are recorded all the same (a run-time slot). Written to
// preload.<pid>.uncovered, one line each:
//   export LAYER NAME LIBRARY      a function the shim does not cover
//   import NAME OBJECT             an object linked to call it
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tracers/preload/shim/generic_hooks.h"
#include "tracers/preload/shim/real_symbols.h"
#include "tracers/preload/shim/recorder.h"

namespace cudatrace::preload {

namespace {

struct Uncovered {
  bool runtime;
  std::string name, library;
};

struct Scan {
  std::vector<Uncovered> exports;
  std::vector<std::pair<std::string, std::string>> imports;  // (name, object)
};


// ld.so relocates some dynamic entries in place and not others: an address below the
// load base is still an offset.
uintptr_t at(const dl_phdr_info* info, ElfW(Addr) p) { return p < info->dlpi_addr ? info->dlpi_addr + p : p; }

// How many symbols .dynsym holds: DT_HASH says; with only DT_GNU_HASH, one past the
// highest symbol its chains reach.
size_t symbol_count(const dl_phdr_info* info, const ElfW(Dyn) * dyn) {
  const uint32_t* gnu = nullptr;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_HASH) return reinterpret_cast<const uint32_t*>(at(info, d->d_un.d_ptr))[1];
    if (d->d_tag == DT_GNU_HASH) gnu = reinterpret_cast<const uint32_t*>(at(info, d->d_un.d_ptr));
  }
  if (!gnu) return 0;
  const uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2];
  const uint32_t* buckets = gnu + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
  const uint32_t* chain = buckets + nbuckets;
  uint32_t last = 0;
  for (uint32_t b = 0; b < nbuckets; ++b) last = buckets[b] > last ? buckets[b] : last;
  if (last < symoffset) return symoffset;
  while (!(chain[last - symoffset] & 1)) ++last;
  return last + 1;
}

// Every symbol of one loaded object's .dynsym: f(symbol, name).
template <class F>
void each_symbol(dl_phdr_info* info, F&& f) {
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const ElfW(Sym)*>(at(info, d->d_un.d_ptr));
    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(at(info, d->d_un.d_ptr));
  }
  if (!symtab || !strtab) return;
  const size_t n = symbol_count(info, dyn);
  for (size_t i = 0; i < n; ++i) f(symtab[i], strtab + symtab[i].st_name);
}

// First pass: the exports of libcudart.so* and libcuda.so* the shim does not cover.
int find_exports(dl_phdr_info* info, size_t, void* out) {
  if (!info->dlpi_name || !*info->dlpi_name) return 0;
  const char* file = file_name_of(info->dlpi_name);
  const bool runtime = std::strncmp(file, "libcudart.so", 12) == 0;
  if (!runtime && std::strncmp(file, "libcuda.so", 10) != 0) return 0;
  auto& scan = *static_cast<Scan*>(out);
  each_symbol(info, [&](const ElfW(Sym) & s, const char* name) {
    const int type = ELF64_ST_TYPE(s.st_info);
    if (s.st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC)) return;
    if (std::strncmp(name, runtime ? "cuda" : "cu", runtime ? 4 : 2) != 0) return;
    if (!find_export(name)) scan.exports.push_back({runtime, name, info->dlpi_name});
  });
  return 0;
}

// Second pass: which objects (the program included) import one of them.
int find_imports(dl_phdr_info* info, size_t, void* out) {
  auto& scan = *static_cast<Scan*>(out);
  const char* object = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "(the program)";
  each_symbol(info, [&](const ElfW(Sym) & s, const char* name) {
    if (s.st_shndx != SHN_UNDEF || name[0] != 'c' || name[1] != 'u') return;
    for (const auto& u : scan.exports)
      if (u.name == name) {
        scan.imports.push_back({name, object});
        return;
      }
  });
  return 0;
}

__attribute__((destructor)) void write_uncovered() {
  const char* dir = std::getenv(kDirEnv);
  if (!dir || !recording()) return;
  Scan scan;
  dl_iterate_phdr(find_exports, &scan);
  if (scan.exports.empty()) return;
  dl_iterate_phdr(find_imports, &scan);
  const std::string path = std::string(dir) + "/preload." + std::to_string(getpid()) + ".uncovered";
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    for (const auto& u : scan.exports)
      std::fprintf(f, "export %s %s %s\n", u.runtime ? "runtime" : "driver", u.name.c_str(), u.library.c_str());
    for (const auto& [name, object] : scan.imports) std::fprintf(f, "import %s %s\n", name.c_str(), object.c_str());
    std::fclose(f);
  }
}

}  // namespace

}  // namespace cudatrace::preload
