#include "harness/safe_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace cudatrace {

namespace fs = std::filesystem;

namespace {

std::string reason(int err) { return std::strerror(err); }

std::string random_hex(size_t bytes) {
  unsigned char buf[16];
  bytes = std::min(bytes, sizeof buf);
  if (getrandom(buf, bytes, 0) != ssize_t(bytes)) throw std::runtime_error("getrandom: " + reason(errno));
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < bytes; ++i) s += {digits[buf[i] >> 4], digits[buf[i] & 15]};
  return s;
}

void chown_dir_fd(int dir, uid_t uid, gid_t gid, int depth) {
  if (depth > 64) return;  // results are a few levels deep; anything deeper is not ours
  int copy = dup(dir);
  if (copy < 0) return;
  DIR* d = fdopendir(copy);
  if (!d) {
    close(copy);
    return;
  }
  while (dirent* e = readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    (void)!fchownat(dir, e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW);
    int sub = openat(dir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) {
      chown_dir_fd(sub, uid, gid, depth + 1);
      close(sub);
    }
  }
  closedir(d);
}

}  // namespace

void make_dir_exclusive(const fs::path& dir, mode_t mode) {
  if (mkdir(dir.c_str(), mode) != 0) throw WriteError("cannot create folder " + dir.string() + ": " + reason(errno));
}

std::string create_run_folder(const fs::path& out, const std::string& suffix, fs::path& root) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw WriteError("cannot create " + out.string() + ": " + ec.message());
  char stamp[32];
  std::time_t t = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&t));
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::string id = std::string(stamp) + "-" + random_hex(6) + suffix;
    root = out / id;
    if (mkdir(root.c_str(), 0755) == 0) return id;
    if (errno != EEXIST) throw WriteError("cannot create folder " + root.string() + ": " + reason(errno));
  }
  throw WriteError("cannot create a fresh run folder in " + out.string() + ": every name drawn exists");
}

int create_exclusive(const fs::path& path, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) throw WriteError("cannot create " + path.string() + ": " + reason(errno));
  return fd;
}

namespace {
void write_all(int fd, const std::string& data, const fs::path& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw WriteError("cannot write " + path.string() + ": " + reason(n < 0 ? errno : ENOSPC));
    done += size_t(n);
  }
}

}  // namespace

void write_file_atomic(const fs::path& path, const std::string& data) {
  const fs::path tmp = path.string() + ".tmp";
  int fd = create_exclusive(tmp);
  try {
    write_all(fd, data, path);
    if (fsync(fd) != 0 && errno != EINVAL) throw WriteError("cannot write " + path.string() + ": " + reason(errno));
  } catch (...) {
    close(fd);
    unlink(tmp.c_str());
    throw;
  }
  if (close(fd) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    throw WriteError("cannot write " + path.string() + ": " + reason(err));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    throw WriteError("cannot write " + path.string() + ": " + reason(err));
  }
}

void chown_tree_nofollow(const fs::path& root, uid_t uid, gid_t gid) {
  int dir = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return;
  (void)!fchown(dir, uid, gid);
  chown_dir_fd(dir, uid, gid, 0);
  close(dir);
}

}  // namespace cudatrace
