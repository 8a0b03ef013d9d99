// The registry: the list of the functions with which each method's folder describes its
// methods, and what every method shares (availability, PATH lookup, preloading). Adding a
// method = a folder tracers/<m>/ whose <m>_method.h declares <m>_methods(), and one line in
// the list below (docs/ADDING_A_METHOD.md).
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <stdexcept>

#include "tracers/tracer.h"

#include "tracers/bpftime/bpftime_method.h"
#include "tracers/cupti/cupti_method.h"
#include "tracers/devhook/devhook_method.h"
#include "tracers/jaxprof/jaxprof_method.h"
#include "tracers/none/none_method.h"
#include "tracers/nsys/nsys_method.h"
#include "tracers/preload/preload_method.h"
#include "tracers/sanitizer/sanitizer_method.h"
#include "tracers/strace/strace_method.h"
#include "tracers/torchprof/torchprof_method.h"
#include "tracers/uprobe/uprobe_method.h"

namespace cudatrace {

namespace fs = std::filesystem;

namespace {

// In the order --list shows them and `--method all` runs them.
constexpr std::vector<Method> (*kMethodLists[])() = {
    none_methods,
    preload_methods,
    uprobe_methods,
    cupti_methods,
    devhook_methods,
    bpftime_methods,
    sanitizer_methods,
    strace_methods,
    torchprof_methods,
    jaxprof_methods,
    nsys_methods,
};

}  // namespace

const char* kind_name(MethodKind kind) {
  switch (kind) {
    case MethodKind::kMethod: return "method";
    case MethodKind::kCostReference: return "cost reference";
    case MethodKind::kReference: return "reference";
    case MethodKind::kPlaceholder: return "placeholder";
  }
  return "method";
}

const std::vector<Method>& methods() {
  static const std::vector<Method> all = [] {
    std::vector<Method> out;
    std::set<std::string> names;
    for (auto list : kMethodLists)
      for (Method& m : list()) {
        // Two folders claiming one name would make --method ambiguous: a build error in spirit.
        if (!names.insert(m.name).second) throw std::logic_error("two methods named " + m.name);
        out.push_back(std::move(m));
      }
    return out;
  }();
  return all;
}

const std::map<std::string, std::vector<std::string>>& method_groups() {
  static const std::map<std::string, std::vector<std::string>> groups = [] {
    std::map<std::string, std::vector<std::string>> g{{"all", {}}, {"compared", {}}, {"priced", {}}};
    std::set<std::string> nested;  // the cost references a method's cost split takes apart or is held against
    for (const auto& m : methods()) {
      if (m.cost_split)
        for (const auto& p : m.cost_split->nested) nested.insert(p.reference);
      for (const auto& bar : m.cost_bars) nested.insert(bar.against.begin(), bar.against.end());
    }
    for (const auto& m : methods()) {
      g["all"].push_back(m.name);
      if (m.kind != MethodKind::kCostReference) g["compared"].push_back(m.name);
      if (m.kind != MethodKind::kCostReference || nested.count(m.name)) g["priced"].push_back(m.name);
    }
    return g;
  }();
  return groups;
}

const Method* find_method(const std::string& name) {
  for (const auto& m : methods())
    if (m.name == name) return &m;
  return nullptr;
}

std::filesystem::path find_on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::filesystem::path dir = dirs.substr(start, end - start);
    if (dir.empty()) dir = ".";
    auto candidate = dir / program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

void preload_first(Launch& launch, const fs::path& library, const std::string& what) {
  if (!fs::exists(library)) throw std::runtime_error(what + " not found at " + library.string());
  const char* existing = std::getenv("LD_PRELOAD");
  launch.env["LD_PRELOAD"] = library.string() + (existing && *existing ? std::string(":") + existing : "");
}

// Every reason the method cannot run here, not only the first: a user without a GPU who
// also lacks the tool (or torch) learns of both at once, rather than one per install.
Availability availability(const Method& m, const HostFacts& host, const MethodOptions& options) {
  if (!m.built && !m.not_built_reason.empty()) return {false, "not built: " + m.not_built_reason};
  if (!m.built) return {false, "not built yet (issue #" + std::to_string(m.issue) + ")"};
  std::vector<std::string> why;
  if (m.needs_root && !host.root) why.push_back("needs root or CAP_BPF+CAP_PERFMON (run the harness with sudo)");
  if (m.needs_gpu && !host.gpu) why.push_back("needs a GPU: " + host.gpu_reason);
  for (const auto& tool : m.tools) {
    if (find_on_path(tool).empty()) {
      auto pkg = m.tool_packages.find(tool);
      why.push_back(tool + " not found on PATH" +
                    (pkg != m.tool_packages.end() ? " (apt-get install " + pkg->second + ")" : ""));
    }
  }
  if (m.unavailable_because)
    if (std::string w = m.unavailable_because(); !w.empty()) why.push_back(w);
  if (m.unavailable_with)
    if (std::string w = m.unavailable_with(options); !w.empty()) why.push_back(w);
  std::string joined;
  for (const auto& w : why) joined += (joined.empty() ? "" : "; and ") + w;
  return {joined.empty(), joined};
}

}  // namespace cudatrace
