#include "tracers/pyhook/python_hook.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "common/spawn.h"

namespace cudatrace {

namespace fs = std::filesystem;

fs::path python_hook_dir(const fs::path& prefix, const std::string& method) {
  return prefix / CUDATRACE_LIB_SUBDIR / method;
}

std::string python_option(const MethodOptions& options) {
  const auto it = options.find("python");
  return it == options.end() || it->second.empty() ? std::string("python3") : it->second;
}

std::string python_module_problem(const std::string& python, const std::string& module, const std::string& method) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, std::string> known;
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find({python, module}); it != known.end()) return it->second;
  std::string& why = known[{python, module}];
  if (find_on_path(python).empty()) {
    why = python + " not found (--set " + method + ".python=PATH names the interpreter with " + module + ")";
    return why;
  }
  // -I: neither the harness's environment nor a user's site folder chooses what runs here.
  const SpawnResult r = spawn_and_wait(
      {python, "-I", "-c", "import importlib.util as u; s = u.find_spec('" + module + "'); print(s.origin if s else '')"},
      true, 4096);
  std::string origin = r.output.substr(0, r.output.find('\n'));
  if (r.exit_code != 0)
    why = python + " -I could not look for " + module + " (" +
          (r.error.empty() ? "exit " + std::to_string(r.exit_code) : r.error) + ")";
  else if (origin.empty())
    why = module + " not found by " + python + " (pip install " + module + ", or --set " + method +
          ".python=PATH names the interpreter that has it)";
  return why;
}

void put_hook_first_on_pythonpath(Launch& launch, const fs::path& hook_dir) {
  const auto given = launch.env.find("PYTHONPATH");
  const char* inherited = std::getenv("PYTHONPATH");
  const std::string existing = given != launch.env.end() ? given->second : inherited ? inherited : "";
  launch.env["PYTHONPATH"] = hook_dir.string() + (existing.empty() ? "" : ":" + existing);
}

}  // namespace cudatrace
