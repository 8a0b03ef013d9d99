#pragma once
// Small pieces every results writer uses: UTC time stamps and whole-file JSON writes
// that a reader never sees half-done.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace cudatrace {

std::string utc_now(const char* strftime_format);

// Writes to PATH.tmp and renames over PATH. Throws with the path on failure.
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

}  // namespace cudatrace
