#pragma once
// What the methods whose half inside the program is a Python hook share (torchprof, jaxprof):
// where the hook is installed, how it reaches the program (first on PYTHONPATH), and whether
// the interpreter the user names has the library the hook profiles with.
#include <filesystem>
#include <string>

#include "tracers/tracer.h"

namespace cudatrace {

// <prefix>/lib/cudatrace/<method>: the hook's files and cudatrace_hook.py (hook.cmake).
std::filesystem::path python_hook_dir(const std::filesystem::path& prefix, const std::string& method);

// The interpreter `--set <method>.python=PATH` names, python3 on PATH by default.
std::string python_option(const MethodOptions& options);

// Why `python` cannot run `method`'s hook, which needs the top-level module `module` (torch,
// jax): it is not there, or finds no such module. Empty when it can. Asked with `python -I`,
// which finds the module without importing it; remembered per interpreter and module.
std::string python_module_problem(const std::string& python, const std::string& module, const std::string& method);

// Puts `hook_dir` first on the program's PYTHONPATH, before what the launch or the harness's
// own environment already puts there, so that site imports the hook's sitecustomize.
void put_hook_first_on_pythonpath(Launch& launch, const std::filesystem::path& hook_dir);

}  // namespace cudatrace
