#pragma once
// How root touches the file system (the harness runs under sudo and hands results to the
// user who called it; the traced program runs as that user and can plant links in any
// folder it may write): every file root creates is created exclusively and never through a
// link, folders are never adopted, and results are handed over without following links.
// (What the program wrote is read through common/untrusted_file.h.) Errors carry the path and the system's reason.
#include <sys/types.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace cudatrace {

// A failed write or create: "cannot write PATH: No space left on device".
struct WriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// OUT/<UTC time>-<random>[-suffix], created exclusively (an existing name is never reused:
// another name is drawn), with OUT created first if missing. Returns the run id.
std::string create_run_folder(const std::filesystem::path& out, const std::string& suffix, std::filesystem::path& root);

// mkdir that fails when anything (a folder, a file, a link) is already there.
void make_dir_exclusive(const std::filesystem::path& dir, mode_t mode = 0755);

// open(O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC): fails on anything already there.
int create_exclusive(const std::filesystem::path& path, mode_t mode = 0644);

// Whole-file write: PATH.tmp created exclusively, written, renamed over PATH. On any error
// the .tmp is removed and WriteError names the path and the reason.
void write_file_atomic(const std::filesystem::path& path, const std::string& data);

// Hands a folder tree to uid:gid: descends with openat(O_NOFOLLOW), changes each entry
// with fchownat(AT_SYMLINK_NOFOLLOW), so a link swapped in anywhere is never followed.
void chown_tree_nofollow(const std::filesystem::path& root, uid_t uid, gid_t gid);

}  // namespace cudatrace
