#include "harness/results_io.h"

#include "common/spawn.h"
#include "harness/safe_files.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <stdexcept>

namespace cudatrace {

std::string utc_now(const char* strftime_format) {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, strftime_format, std::gmtime(&t));
  return buf;
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  write_file_atomic(path, j.dump(2) + "\n");
}

void write_report(const std::filesystem::path& prefix, const std::filesystem::path& results) {
  const auto script = prefix / CUDATRACE_DATA_SUBDIR / "cudatrace" / "report" / "generate_report.py";
  if (!std::filesystem::exists(script)) {
    std::fprintf(stderr, "harness: no report: %s is missing\n", script.c_str());
    return;
  }
  // Debian's python3-matplotlib belongs to /usr/bin/python3, whatever python3 is first on PATH.
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string out = (results / "overhead.html").string();
  // An argument vector, never a shell: a folder name with a quote in it is just a name.
  const SpawnResult r = spawn_and_wait({python, script.string(), results.string(), "-o", out}, false);
  if (r.exit_code != 0)
    std::fprintf(stderr, "harness: the report was not written (%s); results are complete without it\n",
                 r.error.empty() ? "see above" : r.error.c_str());
}

void chown_tree(const std::filesystem::path& root, uid_t uid, gid_t gid) { chown_tree_nofollow(root, uid, gid); }

}  // namespace cudatrace
