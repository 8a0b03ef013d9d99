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

// One file with probes: functions[first, first + count) are its.
struct ProbedFile {
  std::string path;  // as the notes name it
  std::string layer;
  std::string role;   // what it is (role_name), empty for the files planned before start
  std::string found;  // when and how it was found
  size_t first = 0, count = 0;
  int64_t aliases = 0;  // names skipped: another name's probe is at the same address
  size_t failed = 0;    // functions whose probes could not be attached
  std::string first_failure;
};

struct ProbePlan {
  std::vector<ProbedFunction> functions;
  nlohmann::json notes = nlohmann::json::object();
  std::vector<ProbedFile> files;
  // Files of a layer that could not be probed, path -> (layer, why): a stripped static
  // cudart, a libcuda or cudart that could not be opened or whose probes all failed.
  std::map<std::string, std::pair<std::string, std::string>> not_probeable;
  // Files already examined: (device major, minor, inode).
  std::set<std::tuple<unsigned, unsigned, uint64_t>> examined;

  // A layer is observed when some file of it has probes attached.
  bool probed(const std::string& layer) const;
  nlohmann::json files_json() const;
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

// Adds the functions of a Driver/Runtime/RuntimeInside file to `plan`, as `binary`, and
// its entry to plan.files (null: nothing to probe in it). `how`: how it was found.
ProbedFile* add_file_functions(ProbePlan& plan, const FileFinding& found, const std::string& binary,
                               const std::string& how);

const char* role_name(FileRole role);

}  // namespace cudatrace
