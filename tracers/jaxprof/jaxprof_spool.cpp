#include "tracers/jaxprof/jaxprof_spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cudatrace {

namespace fs = std::filesystem;

namespace {

// XLA writes one run folder per trace, and the hook starts one trace per process.
constexpr size_t kMaxRuns = 16;
constexpr size_t kMaxNamesInARun = 256;
// The program's folder: its hook's files, one status and one folder per Python process.

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

HeldFolder::HeldFolder(const fs::path& path) {
  fd_ = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) why_ = std::strerror(errno);
}

HeldFolder::HeldFolder(const HeldFolder& parent, const std::string& name) {
  if (!parent.is_open()) {
    why_ = parent.why_;
    return;
  }
  fd_ = openat(parent.fd_, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ >= 0) return;
  const int error = errno;
  // A link opened with O_DIRECTORY | O_NOFOLLOW fails with ENOTDIR as often as with ELOOP.
  struct stat st {};
  const bool link = error == ELOOP || (fstatat(parent.fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode));
  why_ = name + ": " + (link ? "a symbolic link, not followed" : error == ENOTDIR ? "not a folder" : std::strerror(error));
}

HeldFolder::~HeldFolder() {
  if (fd_ >= 0) close(fd_);
}

std::vector<std::string> HeldFolder::names(size_t max, size_t* more) const {
  std::vector<std::string> out;
  if (more) *more = 0;
  if (fd_ < 0) return out;
  const int fd = dup(fd_);  // closedir closes what fdopendir took
  if (fd < 0) return out;
  DIR* d = fdopendir(fd);
  if (!d) {
    close(fd);
    return out;
  }
  rewinddir(d);
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (out.size() < max) out.push_back(name);
    else if (more && ++*more >= max * 16) break;  // a floor past this: the time stays bounded
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

fs::path HeldFolder::path_of(const std::string& name) const {
  return fs::path("/proc/self/fd") / std::to_string(fd_) / name;
}

bool jax_phase_profiled(const std::string& phase) {
  return phase == "profiling" || phase == "exported" || phase == "export_failed" || phase == "yielded_to_program";
}

void find_jax_traces(const HeldFolder& spool, JaxProcess& p, std::vector<std::unique_ptr<HeldFolder>>& held) {
  const std::string folder = "jaxprof." + std::to_string(p.status.pid);
  auto own = std::make_unique<HeldFolder>(spool, folder);
  auto plugins = std::make_unique<HeldFolder>(*own, "plugins");
  auto profile = std::make_unique<HeldFolder>(*plugins, "profile");
  if (!profile->is_open()) {
    p.folder_problem = profile->why();
    return;
  }
  size_t more = 0;
  const std::vector<std::string> runs = profile->names(kMaxRuns, &more);
  p.runs_unread += int64_t(more);
  for (const auto& run : runs) {
    auto run_folder = std::make_unique<HeldFolder>(*profile, run);
    size_t past = 0;
    const std::vector<std::string> names = run_folder->names(kMaxNamesInARun, &past);
    std::string pick;
    if (std::find(names.begin(), names.end(), "perfetto_trace.json.gz") != names.end()) {
      pick = "perfetto_trace.json.gz";
    } else {
      for (const auto& n : names)
        if (ends_with(n, ".trace.json.gz") && pick.empty()) pick = n;
    }
    if (pick.empty()) {
      ++p.runs_unread;
      if (p.folder_problem.empty())
        p.folder_problem = run_folder->is_open() ? run + ": no trace file" : run_folder->why();
      continue;
    }
    p.traces.push_back(run_folder->path_of(pick));
    p.trace_names.push_back(run + "/" + pick);
    held.push_back(std::move(run_folder));
  }
}

std::map<int64_t, JaxProcess> read_jax_spool(const fs::path& dir, SpoolBounds* bounds) {
  std::map<int64_t, JaxProcess> out;
  SpoolBounds own;
  SpoolBounds& b = bounds ? *bounds : own;
  for (auto& [pid, status] : read_spool(dir, "jaxprof", &b)) {
    if (!status.has_status) continue;  // a jaxprof.<pid>.json is no file of the hook's
    out[pid].status = std::move(status);
  }
  const HeldFolder spool(dir);
  size_t more = 0;
  const std::vector<std::string> names = spool.names(b.max_names, &more);
  // The same names again (the run folders among them): counted past the bound once only.
  b.names_unread = std::max(b.names_unread, int64_t(more));
  for (const auto& name : names) {
    if (const int64_t pid = spool_pid_in(name, "jaxprof", ""); pid > 0) {
      JaxProcess& p = out[pid];
      p.status.pid = pid;
      p.has_folder = true;
    }
  }
  return out;
}

}  // namespace cudatrace
