#pragma once
// The files a running process has mapped executable, read from /proc/PID/maps, and a
// descriptor for the very file a mapping maps: the uprobe method probes libraries as the
// traced processes load them (load_follower.h), wherever they came from.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cudatrace {

struct MappedFile {
  uint64_t start = 0, end = 0;  // the mapping's addresses (its /proc/PID/map_files name)
  unsigned dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  std::string path;  // as the kernel names it, " (deleted)" removed
  bool deleted = false;
};

// The executable mappings of files in `maps` (/proc/PID/maps text), the first mapping of
// each (device, inode); anonymous and special mappings ([vdso], ...) left out.
std::vector<MappedFile> executable_files(std::string_view maps);

// /proc/PID/maps, at most 16 MiB of it (`truncated` says there was more). False when the
// process is gone.
bool read_process_maps(pid_t pid, std::string& out, bool* truncated = nullptr);

// A read-only descriptor for the file `m` maps in process `pid`: through
// /proc/PID/map_files (the mapped inode itself, whatever has since been renamed or
// replaced at its path), else the path without following a final link; either way a
// regular file with the mapping's inode, or -1 with `why`.
int open_mapped_file(pid_t pid, const MappedFile& m, std::string& why);

}  // namespace cudatrace
