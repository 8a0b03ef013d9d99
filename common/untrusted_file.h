#pragma once
// Files the traced program wrote (ledger, spool, ring and strace files in its own folder)
// are read by root: the program could have put a link there to a file only root may read.
// These open never through a link, a regular file only; the stream then reads the file
// that was checked (through /proc/self/fd), not whatever the name points to later.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>

namespace cudatrace {

// Why a file opened from outside must not be read, from its fstat: not a regular file, or
// a second hard link (a host with fs.protected_hardlinks=0 lets the program link a file only
// root may read into its own folder; its first lines would reach the user-readable results).
// Empty: it may be read.
std::string why_not_readable_as_untrusted(const struct stat& st);

// A closed stream (and `why` set) when the file is missing, a link, not a regular file or
// one of several hard links to the same file.
// `size`, when given, gets the file's size at the check (for a reader's bound).
std::ifstream open_untrusted(const std::filesystem::path& path, std::string* why = nullptr, uint64_t* size = nullptr);

// The same check, for a reader of its own: the open descriptor (the caller closes it), or -1
// with `why` set ("a symbolic link" for a link). `size` as above.
int open_untrusted_fd(const std::filesystem::path& path, std::string* why = nullptr, uint64_t* size = nullptr);

}  // namespace cudatrace
