#include "tracers/uprobe/library_search.h"

#include "common/spawn.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <sstream>

#include "common/elf_file.h"

namespace cudatrace {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string dir;
  while (std::getline(in, dir, ':')) out.push_back(dir.empty() ? "." : dir);  // ld.so: empty = cwd
  return out;
}

std::string expand_origin(std::string dir, const fs::path& requester) {
  const std::string origin = requester.parent_path().string();
  for (const char* token : {"${ORIGIN}", "$ORIGIN"}) {
    for (size_t at = dir.find(token); at != std::string::npos; at = dir.find(token))
      dir.replace(at, std::string(token).size(), origin);
  }
  return dir;
}

// The first directory holding a 64-bit ELF named `soname`.
fs::path first_in(const std::vector<std::string>& dirs, const std::string& soname, const fs::path& requester) {
  for (const auto& d : dirs) {
    fs::path candidate = fs::path(expand_origin(d, requester)) / soname;
    std::error_code ec;
    // ld.so skips a file of the wrong class and goes on searching; so do we.
    if (fs::is_regular_file(candidate, ec) && access(candidate.c_str(), R_OK) == 0 && is_elf64(candidate))
      return fs::canonical(candidate, ec);
  }
  return {};
}

std::string ldconfig_output() {
  for (const char* ldconfig : {"/sbin/ldconfig", "/usr/sbin/ldconfig", "/usr/bin/ldconfig"}) {
    if (access(ldconfig, X_OK) != 0) continue;
    return spawn_and_wait({ldconfig, "-p"}, true, 16 << 20).output;  // no shell
  }
  return {};
}

}  // namespace

fs::path ld_cache_lookup(const std::string& ldconfig_output, const std::string& soname) {
  // Lines look like: "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"
  std::stringstream in(ldconfig_output);
  std::string line;
  while (std::getline(in, line)) {
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, soname.size() + 1, soname + " ") != 0) continue;
    size_t arrow = line.find(" => ");
    if (arrow == std::string::npos || line.find("x86-64", start) > arrow) continue;
    return line.substr(arrow + 4);
  }
  return {};
}

LibraryLookup find_library(const std::string& soname, const fs::path& requester, const std::string& ld_library_path) {
  const DynamicInfo info = dynamic_info(requester);
  std::error_code ec;
  if (!info.rpath.empty() && info.runpath.empty())
    if (auto p = first_in(info.rpath, soname, requester); !p.empty()) return {p, "RPATH of " + requester.string()};
  if (!ld_library_path.empty())
    if (auto p = first_in(split(ld_library_path), soname, requester); !p.empty()) return {p, "LD_LIBRARY_PATH"};
  if (auto p = first_in(info.runpath, soname, requester); !p.empty()) return {p, "RUNPATH of " + requester.string()};
  if (fs::path cached = ld_cache_lookup(ldconfig_output(), soname); !cached.empty() && fs::exists(cached, ec))
    return {fs::canonical(cached, ec), "ld.so cache"};
  static const std::vector<std::string> defaults{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64",
                                                 "/usr/lib64", "/lib", "/usr/lib"};
  if (auto p = first_in(defaults, soname, requester); !p.empty()) return {p, "default directories"};
  return {{}, soname + " not found (searched RPATH/RUNPATH, LD_LIBRARY_PATH, the ld.so cache and the default directories)"};
}

}  // namespace cudatrace
