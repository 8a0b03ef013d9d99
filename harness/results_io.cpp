#include "harness/results_io.h"

#include <unistd.h>

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

void chown_tree(const std::filesystem::path& root, uid_t uid, gid_t gid) {
  std::error_code ec;
  (void)!chown(root.c_str(), uid, gid);
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    (void)!lchown(it->path().c_str(), uid, gid);
}

}  // namespace cudatrace
