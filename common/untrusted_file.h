#pragma once
// Files the traced program wrote (ledger, spool, ring and strace files in its own folder)
// are read by root: the program could have put a link there to a file only root may read.
// These open never through a link, a regular file only; the stream then reads the file
// that was checked (through /proc/self/fd), not whatever the name points to later.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace cudatrace {

// A closed stream (and `why` set) when the file is missing, a link or not a regular file.
// `size`, when given, gets the file's size at the check (for a reader's bound).
std::ifstream open_untrusted(const std::filesystem::path& path, std::string* why = nullptr, uint64_t* size = nullptr);

}  // namespace cudatrace
