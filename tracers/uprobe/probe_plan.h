#pragma once
// Which functions of which files the uprobe method probes. Two moments: before the
// program runs (the files its loader will map at start, plan_probes), and while it runs,
// for each file a traced process maps (examine_file, called at the loader's
// notification: load_follower.h). A file is probed once, however many processes map it.
#include <sys/types.h>

#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/elf_file.h"
#include "tracers/uprobe/uprobe_decode.h"

namespace cudatrace {

struct ProbePlan {
  std::vector<ProbedFunction> functions;
  nlohmann::json notes = nlohmann::json::object();
  bool runtime = false, driver = false;  // a layer has probes
  // Every file probed (before start or while running): where, which layer, how found.
  nlohmann::json files = nlohmann::json::array();
  // Files with cudart linked in statically and no symbols left: their runtime calls
  // cannot be probed (path -> why).
  std::map<std::string, std::string> runtime_not_probeable;
  // Files already examined: (device major, minor, inode).
  std::set<std::tuple<unsigned, unsigned, uint64_t>> examined;
};

// `exe`: the target (absolute path); `cudart`: static/shared/unknown.
ProbePlan plan_probes(const std::filesystem::path& exe, const std::string& cudart, const std::string& ld_library_path);

// What a file mapped by a traced process is to the uprobe method.
enum class FileRole {
  None,             // no CUDA API in it
  Driver,           // a libcuda.so*
  Runtime,          // a libcudart.so*
  RuntimeInside,    // cudart linked statically into it, with its symbols (an executable, cuBLAS-like library)
  RuntimeStripped,  // cudart linked statically into it, without symbols: not probeable
};
struct FileFinding {
  FileRole role = FileRole::None;
  std::vector<FunctionSymbol> symbols;
};
// `fd`: the file, open; `path`: its name (the role of libcuda/libcudart comes from it).
FileFinding examine_file(int fd, const std::string& path);

// Adds the functions of a Driver/Runtime/RuntimeInside file to `plan`, as `binary`;
// returns how many. `how`: how it was found, for the notes.
size_t add_file_functions(ProbePlan& plan, const FileFinding& found, const std::string& binary, const std::string& how);

const char* role_name(FileRole role);

}  // namespace cudatrace
