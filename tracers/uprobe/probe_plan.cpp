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

// A file probed before start is not examined again when a process maps it.
void note_planned_file(ProbePlan& plan, const fs::path& file, const char* layer, size_t functions, const std::string& via) {
  struct stat st{};
  if (stat(file.c_str(), &st) == 0) plan.examined.insert({major(st.st_dev), minor(st.st_dev), uint64_t(st.st_ino)});
  plan.files.push_back({{"file", file.string()}, {"layer", layer}, {"found", "before start: " + via},
                        {"functions", functions}});
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
      auto symbols = function_symbols(found.path, false, error);
      const size_t before = plan.functions.size();
      const int64_t aliases = add_functions(plan, found.path, symbols, is_runtime_probe, layer::kRuntime);
      plan.notes["runtime"] = {{"file", found.path.string()}, {"found_via", found.via},
                               {"functions", plan.functions.size() - before}, {"aliases_skipped", aliases}};
      plan.runtime = plan.functions.size() > before;
      runtime_file = found.path;
      note_planned_file(plan, found.path, layer::kRuntime, plan.functions.size() - before, found.via);
    }
  } else {
    // Static cudart lives in the executable, its API functions as local symbols.
    auto symbols = function_symbols(exe, true, error);
    const int64_t aliases = add_functions(plan, exe, symbols, is_runtime_probe, layer::kRuntime);
    plan.runtime = !plan.functions.empty();
    if (plan.runtime) note_planned_file(plan, exe, layer::kRuntime, plan.functions.size(), "the executable's symbol table");
    if (plan.runtime)
      plan.notes["runtime"] = {{"file", exe.string()}, {"found_via", "the executable's symbol table (static cudart)"},
                               {"functions", plan.functions.size()}, {"aliases_skipped", aliases}};
    else
      plan.notes["runtime"] = "no cudart functions in " + exe.string() + " (" +
                              (error.empty() ? "it does not link cudart statically" : error) +
                              "): the runtime layer is not observed";
    runtime_file = exe;
  }
  if (runtime_file.empty()) runtime_file = exe;
  LibraryLookup driver = find_library("libcuda.so.1", runtime_file, ld_library_path);
  if (driver.path.empty()) {
    plan.notes["driver"] = driver.via + ": no driver on this host, the driver layer is not observed";
  } else {
    auto symbols = function_symbols(driver.path, false, error);
    const size_t before = plan.functions.size();
    const int64_t aliases = add_functions(plan, driver.path, symbols, is_driver_probe, layer::kDriver);
    plan.driver = plan.functions.size() > before;
    note_planned_file(plan, driver.path, layer::kDriver, plan.functions.size() - before, driver.via);
    plan.notes["driver"] = {{"file", driver.path.string()}, {"found_via", driver.via},
                            {"functions", plan.functions.size() - before}, {"aliases_skipped", aliases}};
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

size_t add_file_functions(ProbePlan& plan, const FileFinding& found, const std::string& binary, const std::string& how) {
  const bool driver = found.role == FileRole::Driver;
  if (!driver && found.role != FileRole::Runtime && found.role != FileRole::RuntimeInside) return 0;
  const size_t before = plan.functions.size();
  const int64_t aliases = add_functions(plan, binary, found.symbols, driver ? is_driver_probe : is_runtime_probe,
                                        driver ? layer::kDriver : layer::kRuntime);
  const size_t added = plan.functions.size() - before;
  if (added) (driver ? plan.driver : plan.runtime) = true;
  plan.files.push_back({{"file", binary}, {"layer", driver ? layer::kDriver : layer::kRuntime},
                        {"role", role_name(found.role)}, {"found", how}, {"functions", added},
                        {"aliases_skipped", aliases}});
  return added;
}

}  // namespace cudatrace
