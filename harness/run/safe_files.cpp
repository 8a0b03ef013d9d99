#include "harness/run/safe_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/outside_text.h"

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

// Hands over what root made in the folder `dir` (root's own, open), depth first, then the
// folder itself. Only what is root's is changed: a folder owned by root, or a regular file
// owned by root with exactly one link. The program's user can add no entry to a folder of
// root's; a file of its own there is already its; and a file with a second link is one that
// exists elsewhere too (a hard link planted, on a host with fs.protected_hardlinks=0, to a
// file only root may change): handing that over would hand over the other. Each entry is
// checked and changed through one descriptor, so a name swapped in between changes nothing.
void chown_dir_fd(int dir, uid_t uid, gid_t gid, int depth) {
  if (depth > 64) return;  // results are a few levels deep; anything deeper is not ours
  int copy = dup(dir);
  if (copy < 0) return;
  DIR* d = fdopendir(copy);
  if (!d) {
    close(copy);
    return;
  }
  const uid_t self = geteuid();
  while (dirent* e = readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    const int fd = openat(dir, e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_uid == self) {
      if (S_ISDIR(st.st_mode)) {
        const int sub = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sub >= 0) {
          chown_dir_fd(sub, uid, gid, depth + 1);
          close(sub);
        }
        (void)!fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
      } else if (S_ISREG(st.st_mode) && st.st_nlink == 1) {
        (void)!fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
      }
    }
    close(fd);
  }
  closedir(d);
}

}  // namespace

void make_dir_exclusive(const fs::path& dir, mode_t mode) {
  if (mkdir(dir.c_str(), mode) != 0) throw WriteError("cannot create folder " + dir.string() + ": " + reason(errno));
}

std::string create_run_folder(const fs::path& out, const std::string& suffix, fs::path& root,
                              std::vector<fs::path>* created) {
  // The folders missing on the way to OUT, deepest first: those are made here, for the user.
  std::vector<fs::path> missing;
  struct stat st {};
  for (fs::path p = out; !p.empty() && lstat(p.c_str(), &st) != 0 && errno == ENOENT; p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw WriteError("cannot create " + shown(out.string()) + ": " + ec.message());
  if (created) created->insert(created->end(), missing.rbegin(), missing.rend());
  char stamp[32];
  std::time_t t = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&t));
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::string id = std::string(stamp) + "-" + random_hex(6) + suffix;
    root = out / id;
    if (mkdir(root.c_str(), 0755) == 0) return id;
    if (errno != EEXIST) throw WriteError("cannot create folder " + shown(root.string()) + ": " + reason(errno));
  }
  throw WriteError("cannot create a fresh run folder in " + shown(out.string()) + ": every name drawn exists");
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
  struct stat st {};
  if (fstat(dir, &st) == 0 && st.st_uid == geteuid()) {  // a folder in its place that is not root's: not ours
    chown_dir_fd(dir, uid, gid, 0);
    (void)!fchown(dir, uid, gid);
  }
  close(dir);
}

void hand_over_created_folders(const std::vector<fs::path>& folders, uid_t uid, gid_t gid) {
  for (const auto& f : folders) {
    int dir = open(f.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) continue;
    struct stat st {};
    if (fstat(dir, &st) == 0 && st.st_uid == geteuid()) (void)!fchown(dir, uid, gid);
    close(dir);
  }
}

SpaceReserve::SpaceReserve(const fs::path& folder, uint64_t bytes) : path_(folder / ".space-reserve") {
  const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  for (; bytes >= (uint64_t(64) << 10); bytes /= 2) {
    if (posix_fallocate(fd, 0, off_t(bytes)) == 0) {
      bytes_ = bytes;
      break;
    }
  }
  close(fd);
  if (bytes_ == 0) unlink(path_.c_str());
}

bool SpaceReserve::release() {
  if (bytes_ == 0) return false;
  bytes_ = 0;
  return unlink(path_.c_str()) == 0;
}

}  // namespace cudatrace
