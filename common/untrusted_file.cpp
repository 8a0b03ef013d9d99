#include "common/untrusted_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cudatrace {

std::string why_not_readable_as_untrusted(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_nlink > 1)
    return "a file with " + std::to_string(st.st_nlink) + " hard links: another of its names may be a file the program may not read";
  return {};
}

int open_untrusted_fd(const std::filesystem::path& path, std::string* why, uint64_t* size) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (why) *why = errno == ELOOP ? "a symbolic link" : std::strerror(errno);
    return -1;
  }
  struct stat st {};
  std::string refused;
  if (fstat(fd, &st) != 0 || !(refused = why_not_readable_as_untrusted(st)).empty()) {
    if (why) *why = refused.empty() ? std::string("cannot stat it") : refused;
    close(fd);
    return -1;
  }
  if (size) *size = uint64_t(st.st_size);
  return fd;
}

std::ifstream open_untrusted(const std::filesystem::path& path, std::string* why, uint64_t* size) {
  const int fd = open_untrusted_fd(path, why, size);
  if (fd < 0) {
    std::ifstream none;
    none.setstate(std::ios::failbit);  // reads as "could not open", as a plain ifstream would
    return none;
  }
  std::ifstream in("/proc/self/fd/" + std::to_string(fd), std::ios::binary);
  close(fd);
  if (!in && why) *why = "cannot reopen it through /proc/self/fd";
  return in;
}

}  // namespace cudatrace
