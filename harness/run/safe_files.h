#pragma once
// How root touches the file system (the harness runs under sudo and hands results to the
// user who called it; the traced program runs as that user and can plant links in any
// folder it may write): every file root creates is created exclusively and never through a
// link, folders are never adopted, and results are handed over without following links.
// (What the program wrote is read through common/untrusted_file.h.) Errors carry the path and the system's reason.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
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
