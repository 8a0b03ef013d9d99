#include "harness/results_io.h"

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

}  // namespace cudatrace
