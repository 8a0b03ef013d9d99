#include "harness/results_io.h"

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
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    f << j.dump(2) << "\n";
    if (!f) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
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
  const std::string command = python + " '" + script.string() + "' '" + results.string() + "' -o '" + out + "' >&2";
  if (std::system(command.c_str()) != 0)
    std::fprintf(stderr, "harness: the report was not written (see above); results are complete without it\n");
}

void chown_tree(const std::filesystem::path& root, uid_t uid, gid_t gid) {
  std::error_code ec;
  (void)!chown(root.c_str(), uid, gid);
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    (void)!lchown(it->path().c_str(), uid, gid);
}

}  // namespace cudatrace
