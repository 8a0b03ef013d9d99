#pragma once
// Finds the file the dynamic loader will map for a library name, the way ld.so searches
// for the target (not for the harness): the requester's DT_RPATH (when it has no
// DT_RUNPATH), LD_LIBRARY_PATH as the target's environment has it, DT_RUNPATH, the ld.so
// cache, then the default directories. A uprobe on any other copy would never fire.
#include <filesystem>
#include <string>
#include <vector>

namespace cudatrace {

struct LibraryLookup {
  std::filesystem::path path;  // canonical; empty when not found
  std::string via;             // "RUNPATH", "LD_LIBRARY_PATH", "ld.so cache", ... or why not found
};

// `requester`: the ELF file whose DT_NEEDED or dlopen asks for `soname` (its RPATH/RUNPATH
// apply, $ORIGIN relative to it). `ld_library_path`: the target's LD_LIBRARY_PATH.
LibraryLookup find_library(const std::string& soname, const std::filesystem::path& requester,
                           const std::string& ld_library_path);

// `ldconfig -p` output -> the path it gives for `soname` on x86-64, or empty.
std::filesystem::path ld_cache_lookup(const std::string& ldconfig_output, const std::string& soname);

}  // namespace cudatrace
