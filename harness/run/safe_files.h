#pragma once
// How root touches the file system (the harness runs under sudo and hands results to the
// user who called it; the traced program runs as that user and can plant links in any
// folder it may write): every file root creates is created exclusively and never through a
// link, folders are never adopted, and results are handed over without following links.
// (What the program wrote is read through common/untrusted_file.h.) Errors carry the path and the system's reason.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cudatrace {

// A failed write or create: "cannot write PATH: No space left on device".
struct WriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// OUT/<UTC time>-<random>[-suffix], created exclusively (an existing name is never reused:
// another name is drawn), with OUT created first if missing. Returns the run id. `created`
// gets the folders made on the way to OUT (outermost first), to hand to the user at the end.
std::string create_run_folder(const std::filesystem::path& out, const std::string& suffix, std::filesystem::path& root,
                              std::vector<std::filesystem::path>* created = nullptr);

// mkdir that fails when anything (a folder, a file, a link) is already there.
void make_dir_exclusive(const std::filesystem::path& dir, mode_t mode = 0755);

// open(O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC): fails on anything already there.
int create_exclusive(const std::filesystem::path& path, mode_t mode = 0644);

// Whole-file write: PATH.tmp created exclusively, written, renamed over PATH. On any error
// the .tmp is removed and WriteError names the path and the reason.
void write_file_atomic(const std::filesystem::path& path, const std::string& data);

// Hands a folder tree root made to uid:gid, following no link: only folders owned by root
// and regular files owned by root with a single link change owner (a file with a second
// link is also somewhere else: a planted hard link); folders of the user's are not entered.
void chown_tree_nofollow(const std::filesystem::path& root, uid_t uid, gid_t gid);

// The folders create_run_folder() made on the way to OUT (a fresh --out, the default
// results/) belong to the user who ran the harness: each handed over if it is still root's.
void hand_over_created_folders(const std::vector<std::filesystem::path>& folders, uid_t uid, gid_t gid);

// A folder held open, and what lies below it reached from the folder held, one name at a
// time, never through a link. Root exports folders the user owns (--export-otlp, -trace,
// -jsonl): checking a name for a link and then opening it by path is a race the user wins by
// swapping the name for a link to a root-only folder in between. Here the check is the open
// (O_NOFOLLOW on each name), and later reads go through the descriptor, so a swap after it
// redirects nothing. The readers that take a path (EventReader, read_ledgers, open_untrusted)
// are given path_of(name): /proc/self/fd/<fd>/<name>, which the kernel resolves to the folder
// held, not to whatever its name points to now. Errors are one line (std::runtime_error).
class HeldDir {
 public:
  // `path` itself, never through a link in its last name (trailing '/' and "/." are dropped:
  // "link/" would follow the link). Names above it are the caller's choice of path. Fails,
  // rather than reads by name, where /proc/self/fd does not lead back to the folder held.
  static HeldDir open(const std::filesystem::path& path);
  // The folder `name` in this one (one name: no '/', not "." or ".."), never through a link.
  HeldDir sub(const std::string& name) const;
  // The same; nothing when it is not a folder to enter, `err` then the reason: ENOENT
  // (missing), ELOOP (a link), ENOTDIR (something else).
  std::optional<HeldDir> try_sub(const std::string& name, int* err = nullptr) const;
  // Whether `name` is there, whatever it is (a link is not followed).
  bool has(const std::string& name) const;
  // The names in the folder held (not "." and ".."), in name order.
  std::vector<std::string> names() const;
  // /proc/self/fd/<fd>/<name> (the folder itself for ""): for readers that take a path.
  std::string path_of(const std::string& name = "") const;
  // The path as given and `name` below it: for messages.
  std::filesystem::path shown_path(const std::string& name = "") const { return name.empty() ? shown_ : shown_ / name; }
  // `message` with each path_of() prefix in it written as the path given, escaped (shown()).
  std::string named(const std::string& message) const;
  // openat(O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC): a new file in the folder held;
  // throws WriteError with the path given and the reason.
  int create_file(const std::string& name, mode_t mode = 0644) const;
  // unlinkat: removes the file `name` (never a folder) if there is one; false when none was.
  bool remove_file(const std::string& name) const;
  int fd() const { return fd_; }

  HeldDir(HeldDir&& o) noexcept : fd_(o.fd_), shown_(std::move(o.shown_)) { o.fd_ = -1; }
  HeldDir& operator=(HeldDir&& o) noexcept;
  HeldDir(const HeldDir&) = delete;
  HeldDir& operator=(const HeldDir&) = delete;
  ~HeldDir();

 private:
  HeldDir(int fd, std::filesystem::path shown);
  int fd_ = -1;
  std::filesystem::path shown_;
};

// Space set aside in the results folder before the runs, so that the run's summary
// (run.json, summary.json) can be written when a program has filled the disk: a file
// allocated now (as much of `bytes` as the disk has, down to 64 KiB) and freed when needed.
class SpaceReserve {
 public:
  SpaceReserve(const std::filesystem::path& folder, uint64_t bytes);
  ~SpaceReserve() { release(); }
  SpaceReserve(const SpaceReserve&) = delete;
  SpaceReserve& operator=(const SpaceReserve&) = delete;
  // Frees the space (removes the file); true when there was some to free.
  bool release();
  uint64_t bytes() const { return bytes_; }

 private:
  std::filesystem::path path_;
  uint64_t bytes_ = 0;
};

}  // namespace cudatrace
