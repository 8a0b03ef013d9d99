#include "tracers/uprobe/probe_plan.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <map>

#include "tracers/uprobe/library_search.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The runtime functions worth a probe: the API (cuda*), the launch entry CUDA 13's <<<>>>
// uses, and the two calls that name kernels. cudart's other __cuda* plumbing
// (__cudaPushCallConfiguration, ...) is not the program's API and would only add cost.
bool is_runtime_probe(const std::string& name) {
  return name.rfind("cuda", 0) == 0 || name == "__cudaLaunchKernel" || name == "__cudaLaunchKernel_ptsz" ||
         name == "__cudaRegisterFunction" || name == "__cudaGetKernel";
}

bool is_driver_probe(const std::string& name) { return name.rfind("cu", 0) == 0 && name.rfind("cuda", 0) != 0; }

// Adds one probe per code address: two names for one address would report each call twice.
// Of aliases, the name we decode arguments for wins, then the shorter one.
int64_t add_functions(ProbePlan& plan, const fs::path& binary, const std::vector<FunctionSymbol>& symbols,
                      bool (*wanted)(const std::string&), const char* layer) {
  std::map<uint64_t, const FunctionSymbol*> by_offset;
  int64_t aliases = 0;
  for (const auto& s : symbols) {
    if (!wanted(s.name)) continue;
    auto [it, fresh] = by_offset.try_emplace(s.file_offset, &s);
    if (fresh) continue;
    ++aliases;
    const FunctionSymbol* old = it->second;
    const bool new_known = probe_spec(s.name) || find_call(s.name);
    const bool old_known = probe_spec(old->name) || find_call(old->name);
    if ((new_known && !old_known) || (new_known == old_known && s.name.size() < old->name.size())) it->second = &s;
  }
  for (const auto& [offset, s] : by_offset) plan.functions.push_back({s->name, layer, binary.string(), offset});
  return aliases;
}

// The functions of `file` that `wanted` accepts, into the plan with the file's entry. A
// file probed before start is not examined again when a process maps it.
ProbedFile& add_file(ProbePlan& plan, const fs::path& file, const std::vector<FunctionSymbol>& symbols,
                     bool (*wanted)(const std::string&), const char* layer, const std::string& found) {
  struct stat st{};
  if (stat(file.c_str(), &st) == 0) plan.examined.insert({major(st.st_dev), minor(st.st_dev), uint64_t(st.st_ino)});
  ProbedFile f{file.string(), layer, "", found, plan.functions.size()};
  f.aliases = add_functions(plan, file, symbols, wanted, layer);
  f.count = plan.functions.size() - f.first;
  plan.files.push_back(std::move(f));
  return plan.files.back();
}

}  // namespace

ProbePlan plan_probes(const fs::path& exe, const std::string& cudart, const std::string& ld_library_path) {
  ProbePlan plan;
  std::string error;
  fs::path runtime_file;  // what asks for libcuda.so.1 (cudart's own RUNPATH applies to its dlopen)
  if (cudart == "shared") {
    for (const auto& lib : needed_libraries(exe)) {
      if (lib.rfind("libcudart.so", 0) != 0) continue;
      LibraryLookup found = find_library(lib, exe, ld_library_path);
      if (found.path.empty()) {
        plan.notes["runtime"] = found.via;
        break;
      }
      const ProbedFile& f = add_file(plan, found.path, function_symbols(found.path, false, error), is_runtime_probe,
                                     layer::kRuntime, "before start: " + found.via);
      plan.notes["runtime"] = {{"file", found.path.string()}, {"found_via", found.via},
                               {"functions", f.count}, {"aliases_skipped", f.aliases}};
      runtime_file = found.path;
    }
  } else {
    // Static cudart lives in the executable, its API functions as local symbols.
    const auto symbols = function_symbols(exe, true, error);
    if (has_cudart_api(symbols)) {
      const ProbedFile& f = add_file(plan, exe, symbols, is_runtime_probe, layer::kRuntime,
                                     "before start: the executable's symbol table");
      plan.notes["runtime"] = {{"file", exe.string()}, {"found_via", "the executable's symbol table (static cudart)"},
                               {"functions", f.count}, {"aliases_skipped", f.aliases}};
    } else {
      plan.notes["runtime"] = "no cudart functions in " + exe.string() + " (" +
                              (error.empty() ? "it does not link cudart statically" : error) +
                              "): the runtime layer is not observed";
    }
    runtime_file = exe;
  }
  if (runtime_file.empty()) runtime_file = exe;
  LibraryLookup driver = find_library("libcuda.so.1", runtime_file, ld_library_path);
  if (driver.path.empty()) {
    plan.notes["driver"] = driver.via + ": no driver on this host, the driver layer is not observed";
  } else {
    const ProbedFile& f = add_file(plan, driver.path, function_symbols(driver.path, false, error), is_driver_probe,
                                   layer::kDriver, "before start: " + driver.via);
    plan.notes["driver"] = {{"file", driver.path.string()}, {"found_via", driver.via},
                            {"functions", f.count}, {"aliases_skipped", f.aliases}};
  }
  return plan;
}


const char* role_name(FileRole role) {
  switch (role) {
    case FileRole::Driver: return "driver (libcuda)";
    case FileRole::Runtime: return "runtime (libcudart)";
    case FileRole::RuntimeInside: return "runtime (cudart linked into it statically)";
    case FileRole::RuntimeStripped: return "runtime (cudart linked into it statically, without symbols)";
    case FileRole::None: break;
  }
  return "none";
}

FileFinding examine_file(int fd, const std::string& path) {
  FileFinding found;
  const std::string base = fs::path(path).filename().string();
  std::string error;
  if (base.rfind("libcuda.so", 0) == 0) {
    found.role = FileRole::Driver;
    found.symbols = function_symbols(fd, false, error);
    return found;
  }
  if (base.rfind("libcudart.so", 0) == 0) {
    found.role = FileRole::Runtime;
    found.symbols = function_symbols(fd, false, error);
    return found;
  }
  // A program on the shared runtime has no cudart of its own: nothing more to look for.
  for (const auto& lib : dynamic_info(fd).needed)
    if (lib.rfind("libcudart.so", 0) == 0) return found;
  // Only the names a runtime probe can have (is_runtime_probe) are read.
  found.symbols = function_symbols(fd, true, error, [](std::string_view name) {
    return name.rfind("cuda", 0) == 0 || name.rfind("__cuda", 0) == 0;
  });
  if (has_cudart_api(found.symbols)) {
    found.role = FileRole::RuntimeInside;
    return found;
  }
  found.symbols.clear();
  // Stripped, cudart still leaves in .rodata its error names (cudaGetErrorName's table)
  // and the driver it dlopens. Both: NVRTC's builtins carry CUDA's headers, error names
  // included, and no cudart.
  if (section_contains(fd, ".rodata", {"cudaErrorMissingConfiguration", "libcuda.so.1"}))
    found.role = FileRole::RuntimeStripped;
  return found;
}

ProbedFile* add_file_functions(ProbePlan& plan, const FileFinding& found, const std::string& binary,
                               const std::string& how) {
  const bool driver = found.role == FileRole::Driver;
  if (!driver && found.role != FileRole::Runtime && found.role != FileRole::RuntimeInside) return nullptr;
  ProbedFile& f = add_file(plan, binary, found.symbols, driver ? is_driver_probe : is_runtime_probe,
                           driver ? layer::kDriver : layer::kRuntime, how);
  f.role = role_name(found.role);
  return &f;
}

bool ProbePlan::probed(const std::string& layer) const {
  for (const auto& f : files)
    if (f.layer == layer && f.count > f.failed) return true;
  return false;
}

json ProbePlan::files_json() const {
  json out = json::array();
  for (const auto& f : files) {
    json j = {{"file", f.path}, {"layer", f.layer}, {"found", f.found}, {"functions", f.count},
              {"aliases_skipped", f.aliases}, {"functions_failed", f.failed}};
    if (!f.role.empty()) j["role"] = f.role;
    if (!f.first_failure.empty()) j["first_failure"] = f.first_failure;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace cudatrace
