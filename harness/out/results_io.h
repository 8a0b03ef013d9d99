#pragma once
// Small pieces every results writer uses: UTC time stamps and whole-file JSON writes
// that a reader never sees half-done.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/machine.h"  // available_memory_bytes, for the bounds that scale with the memory

namespace cudatrace {

std::string utc_now(const char* strftime_format);

// Half the space free under `dir` to an unprivileged writer, at least 64 MiB (a disk that
// full fails the runs' own writes, which say so): what a run may read of a method's files
// when the user sets no --max-trace-bytes.
uint64_t half_free_space(const std::filesystem::path& dir);

// Writes to PATH.tmp (created exclusively, never through a link) and renames over PATH.
// Throws WriteError with the path and the system's reason; no .tmp is left behind.
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

// The Python that draws the report: the first python3 on `path_env` (absolute entries
// only) that imports matplotlib — a framework's environment on a GPU host has it where the
// system's may not — then /usr/bin/python3 (Debian's python3-matplotlib). Empty path when
// none does; `tried` lists what was tried.
struct ReportPython {
  std::string path;
  std::vector<std::string> tried;
};
ReportPython find_report_python(const std::string& path_env);

// Runs share/cudatrace/report/generate_report.py on `results` (writes results/overhead.html)
// with find_report_python()'s Python, and says which. A missing Python or matplotlib is
// reported on stderr, never a failed run.
void write_report(const std::filesystem::path& prefix, const std::filesystem::path& results);

// Hands a results folder to the user who ran the harness through sudo (best effort),
// following no link.
void chown_tree(const std::filesystem::path& root, uid_t uid, gid_t gid);

}  // namespace cudatrace
