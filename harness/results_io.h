#pragma once
// Small pieces every results writer uses: UTC time stamps and whole-file JSON writes
// that a reader never sees half-done.
#include <sys/types.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace cudatrace {

std::string utc_now(const char* strftime_format);

// Writes to PATH.tmp (created exclusively, never through a link) and renames over PATH.
// Throws WriteError with the path and the system's reason; no .tmp is left behind.
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

// Runs share/cudatrace/report/generate_report.py on `results` (writes results/overhead.html).
// A missing Python or matplotlib is reported on stderr, never a failed run.
void write_report(const std::filesystem::path& prefix, const std::filesystem::path& results);

// Hands a results folder to the user who ran the harness through sudo (best effort),
// following no link.
void chown_tree(const std::filesystem::path& root, uid_t uid, gid_t gid);

}  // namespace cudatrace
