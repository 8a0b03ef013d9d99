#include "tracers/uprobe/process_maps.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>
#include <tuple>
#include <utility>

namespace cudatrace {

std::vector<MappedFile> executable_files(std::string_view maps) {
  std::vector<MappedFile> out;
  std::set<std::tuple<unsigned, unsigned, uint64_t>> seen;
  size_t at = 0;
  while (at < maps.size()) {
    size_t nl = maps.find('\n', at);
    if (nl == std::string_view::npos) nl = maps.size();
    const std::string line(maps.substr(at, nl - at));
    at = nl + 1;
    MappedFile m;
    char perms[8] = {};
    uint64_t offset = 0;
    int path_at = -1;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &m.start, &m.end, perms,
                    &offset, &m.dev_major, &m.dev_minor, &m.inode, &path_at) < 7 ||
        path_at < 0)
      continue;
    if (std::strlen(perms) < 3 || perms[2] != 'x' || m.inode == 0) continue;
    m.path = line.substr(size_t(path_at));
    if (m.path.empty() || m.path[0] != '/') continue;
    constexpr std::string_view kDeleted = " (deleted)";
    if (m.path.size() > kDeleted.size() && m.path.compare(m.path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
      m.path.resize(m.path.size() - kDeleted.size());
      m.deleted = true;
    }
    if (!seen.insert({m.dev_major, m.dev_minor, m.inode}).second) continue;
    out.push_back(std::move(m));
  }
  return out;
}

bool read_process_maps(pid_t pid, std::string& out, bool* truncated) {
  constexpr size_t kMaxBytes = 16 << 20;
  out.clear();
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[64 << 10];
  ssize_t got;
  while (out.size() < kMaxBytes && (got = read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(got));
  if (truncated) *truncated = out.size() >= kMaxBytes && read(fd, buf, 1) > 0;
  close(fd);
  return true;
}

namespace {

bool same_file(int fd, const MappedFile& m, std::string& why) {
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    why = std::string("fstat: ") + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
    return false;
  }
  if (uint64_t(st.st_ino) != m.inode || major(st.st_dev) != m.dev_major || minor(st.st_dev) != m.dev_minor) {
    why = "the file at that path is no longer the one mapped";
    return false;
  }
  return true;
}

}  // namespace

int open_mapped_file(pid_t pid, const MappedFile& m, std::string& why) {
  char link[96];
  std::snprintf(link, sizeof link, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, int(pid), m.start, m.end);
  // O_NONBLOCK: whatever is found must not hold the harness up (it is checked to be a
  // regular file before anything is read).
  int fd = open(link, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const std::string map_files_error = std::strerror(errno);
    if (m.deleted) {
      why = "deleted, and " + std::string(link) + ": " + map_files_error;
      return -1;
    }
    fd = open(m.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
      why = std::string(link) + ": " + map_files_error + "; " + m.path + ": " + std::strerror(errno);
      return -1;
    }
  }
  if (!same_file(fd, m, why)) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace cudatrace
