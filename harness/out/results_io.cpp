#include "harness/out/results_io.h"

#include <sys/statvfs.h>

#include "common/outside_text.h"
#include "common/spawn.h"
#include "harness/run/safe_files.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <stdexcept>

namespace cudatrace {

uint64_t half_free_space(const std::filesystem::path& dir) {
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) return uint64_t(128) << 20;
  return std::max(uint64_t(st.f_bavail) * uint64_t(st.f_frsize) / 2, uint64_t(64) << 20);
}

std::string utc_now(const char* strftime_format) {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, strftime_format, std::gmtime(&t));
  return buf;
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  write_file_atomic(path, dump_safe(j, 2) + "\n");
}

ReportPython find_report_python(const std::string& path_env) {
  ReportPython found;
  std::vector<std::string> candidates;
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    // An empty or relative PATH entry would mean the current folder: never, as root.
    if (end > start && path_env[start] == '/') candidates.push_back(path_env.substr(start, end - start) + "/python3");
    start = end + 1;
  }
  candidates.push_back("/usr/bin/python3");  // Debian's python3-matplotlib belongs to it
  for (const auto& c : candidates) {
    if (access(c.c_str(), X_OK) != 0) continue;
    if (std::find(found.tried.begin(), found.tried.end(), c) != found.tried.end()) continue;
    found.tried.push_back(c);
    if (spawn_and_wait({c, "-c", "import matplotlib"}, true, 4096).exit_code == 0) {
      found.path = c;
      break;
    }
  }
  return found;
}

void write_report(const std::filesystem::path& prefix, const std::filesystem::path& results) {
  const auto script = prefix / CUDATRACE_DATA_SUBDIR / "cudatrace" / "report" / "generate_report.py";
  if (!std::filesystem::exists(script)) {
    std::fprintf(stderr, "harness: no report: %s is missing\n", script.c_str());
    return;
  }
  const char* path_env = std::getenv("PATH");
  const ReportPython python = find_report_python(path_env ? path_env : "");
  if (python.path.empty()) {
    std::string tried;
    for (const auto& t : python.tried) tried += (tried.empty() ? "" : ", ") + t;
    std::fprintf(stderr,
                 "harness: the report was not written: no python3 with matplotlib (tried %s; apt-get install "
                 "python3-matplotlib, or put a python3 that has it first on PATH); results are complete without it\n",
                 tried.empty() ? "none found" : tried.c_str());
    return;
  }
  const std::string out = (results / "overhead.html").string();
  // An argument vector, never a shell: a folder name with a quote in it is just a name.
  const SpawnResult r = spawn_and_wait({python.path, script.string(), results.string(), "-o", out}, false);
  if (r.exit_code != 0)
    std::fprintf(stderr, "harness: the report was not written (%s); results are complete without it\n",
                 r.error.empty() ? "see above" : r.error.c_str());
  else
    std::fprintf(stderr, "harness: report drawn by %s\n", python.path.c_str());
}

void chown_tree(const std::filesystem::path& root, uid_t uid, gid_t gid) { chown_tree_nofollow(root, uid, gid); }

}  // namespace cudatrace
