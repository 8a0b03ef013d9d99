#include "harness/run/safe_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
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

namespace {

std::string fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// One name of a folder's entries: never a path (a '/' would walk on by name, through links).
bool plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// An open of a link with O_DIRECTORY|O_NOFOLLOW fails ENOTDIR (or ELOOP without
// O_DIRECTORY): told apart from a file so that the message says "link".
int why_not_entered(int dir, const char* name, int err) {
  struct stat st {};
  if ((err == ENOTDIR || err == ELOOP) && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
    return S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
  return err;
}

std::string not_entered(const fs::path& path, int err) {
  switch (err) {
    case ELOOP:
      return shown(path.string()) + " is a link: not followed";
    case ENOTDIR:
      return shown(path.string()) + " is not a folder";
    case ENOENT:
      return "no such folder: " + shown(path.string());
    case EINVAL:
      return shown(path.string()) + " is not one name in its folder";
    default:
      return "cannot open " + shown(path.string()) + ": " + reason(err);
  }
}

// The readers are handed /proc/self/fd/<fd>/...: that must lead to the folder held. Where it
// does not (no /proc in a chroot or a container), reading by name instead would follow links
// again, so the export stops and says why.
void check_proc_leads_back(int fd, const fs::path& path) {
  struct stat held {}, via {};
  if (fstat(fd, &held) == 0 && stat(fd_path(fd).c_str(), &via) == 0 && held.st_dev == via.st_dev &&
      held.st_ino == via.st_ino)
    return;
  close(fd);
  throw std::runtime_error("cannot read " + shown(path.string()) +
                           " without following links: /proc/self/fd does not lead back to the folder held "
                           "(is /proc mounted?)");
}

}  // namespace

HeldDir::HeldDir(int fd, fs::path shown) : fd_(fd), shown_(std::move(shown)) {}

HeldDir::~HeldDir() {
  if (fd_ >= 0) close(fd_);
}

HeldDir& HeldDir::operator=(HeldDir&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    shown_ = std::move(o.shown_);
    o.fd_ = -1;
  }
  return *this;
}

HeldDir HeldDir::open(const fs::path& path) {
  std::string p = path.string();
  for (;;) {  // "dir/" and "dir/." name dir, but open() would follow dir when it is a link
    if (p.size() > 1 && p.back() == '/') {
      p.pop_back();
    } else if (p.size() > 2 && p.compare(p.size() - 2, 2, "/.") == 0) {
      p.resize(p.size() - 2);
    } else {
      break;
    }
  }
  if (p.empty()) throw std::runtime_error("no such folder: ''");
  const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = why_not_entered(AT_FDCWD, p.c_str(), errno);
    throw std::runtime_error(err == ELOOP ? shown(p) + " is a link: give the folder it names" : not_entered(p, err));
  }
  check_proc_leads_back(fd, p);
  return HeldDir(fd, p);
}

std::optional<HeldDir> HeldDir::try_sub(const std::string& name, int* err) const {
  if (!plain_name(name)) {
    if (err) *err = EINVAL;
    return std::nullopt;
  }
  const int fd = openat(fd_, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int e = why_not_entered(fd_, name.c_str(), errno);
    if (err) *err = e;
    return std::nullopt;
  }
  check_proc_leads_back(fd, shown_ / name);
  return HeldDir(fd, shown_ / name);
}

HeldDir HeldDir::sub(const std::string& name) const {
  int err = 0;
  std::optional<HeldDir> d = try_sub(name, &err);
  if (!d) throw std::runtime_error(not_entered(shown_ / name, err));
  return std::move(*d);
}

bool HeldDir::has(const std::string& name) const {
  struct stat st {};
  return plain_name(name) && fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

std::vector<std::string> HeldDir::names() const {
  std::vector<std::string> out;
  // A descriptor of its own: readdir moves the offset, which a dup() would share with fd_.
  const int copy = openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) throw std::runtime_error("cannot list " + shown(shown_.string()) + ": " + reason(errno));
  DIR* d = fdopendir(copy);
  if (!d) {
    close(copy);
    throw std::runtime_error("cannot list " + shown(shown_.string()) + ": " + reason(errno));
  }
  while (const dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.emplace_back(e->d_name);
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string HeldDir::path_of(const std::string& name) const {
  if (name.empty()) return fd_path(fd_);
  if (!plain_name(name)) throw std::runtime_error(shown((shown_ / name).string()) + " is not one name in its folder");
  return fd_path(fd_) + "/" + name;
}

std::string HeldDir::named(const std::string& message) const {
  const std::string prefix = fd_path(fd_), as = shown(shown_.string());
  std::string out;
  size_t from = 0;
  for (size_t at; (at = message.find(prefix, from)) != std::string::npos; from = at + prefix.size()) {
    const size_t end = at + prefix.size();
    const bool whole = end == message.size() || !std::isdigit(static_cast<unsigned char>(message[end]));
    out.append(message, from, at - from).append(whole ? as : prefix);  // fd 1 is not fd 12
  }
  return out.append(message, from, std::string::npos);
}

int HeldDir::create_file(const std::string& name, mode_t mode) const {
  if (!plain_name(name)) throw WriteError(shown((shown_ / name).string()) + " is not one name in its folder");
  const int fd = openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    const int err = errno;
    throw WriteError("cannot create " + shown((shown_ / name).string()) + ": " + reason(err) +
                     (err == EEXIST ? " (it exists: not overwritten)" : ""));
  }
  return fd;
}

bool HeldDir::remove_file(const std::string& name) const {
  return plain_name(name) && unlinkat(fd_, name.c_str(), 0) == 0;
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
