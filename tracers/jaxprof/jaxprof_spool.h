#pragma once
// What the jaxprof hook left in the program's folder, process by process: its status files
// (read as torchprof's are: torchprof_spool.h) and the trace jax.profiler wrote in
// jaxprof.<pid>/plugins/profile/<run>/. The folders are the program's: each is entered
// through a descriptor opened never through a link (O_NOFOLLOW), and the trace is opened
// through that descriptor (/proc/self/fd/N/name), so that a link planted anywhere on the way
// leads nowhere; every listing is bounded.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tracers/torchprof/torchprof_spool.h"

namespace cudatrace {

// A folder the program wrote, held open.
class HeldFolder {
 public:
  explicit HeldFolder(const std::filesystem::path& path);  // the run's own folder (followed)
  HeldFolder(const HeldFolder& parent, const std::string& name);  // never through a link
  HeldFolder(const HeldFolder&) = delete;
  HeldFolder& operator=(const HeldFolder&) = delete;
  ~HeldFolder();
  bool is_open() const { return fd_ >= 0; }
  const std::string& why() const { return why_; }
  // Its entries' names, sorted, at most `max`; `more` gets how many were past it.
  std::vector<std::string> names(size_t max, size_t* more) const;
  // A path that reaches `name` in this folder, whatever its own path has become since.
  std::filesystem::path path_of(const std::string& name) const;

 private:
  int fd_ = -1;
  std::string why_;
};

struct JaxProcess {
  SpooledProcess status;  // its status file (has_status false where it left none)
  bool has_folder = false;
  // Its traces (paths through HeldFolder, read while `held` lives), one per run folder.
  std::vector<std::filesystem::path> traces;
  std::vector<std::string> trace_names;  // as the notes show them: <run>/<file>
  int64_t runs_unread = 0;               // run folders past the bound, or with no trace file
  std::string folder_problem;            // why its folder could not be read
};

// The process's folder's traces: perfetto_trace.json.gz in each run folder, else the one
// *.trace.json.gz (the same events, which stop_trace converts into the first).
void find_jax_traces(const HeldFolder& spool, JaxProcess& p, std::vector<std::unique_ptr<HeldFolder>>& held);

// Every process the hook left a status file or a trace folder for, by pid.
std::map<int64_t, JaxProcess> read_jax_spool(const std::filesystem::path& dir, SpoolBounds* bounds = nullptr);

// The phases (cudatrace_jaxprof.py) that mean the process traced.
bool jax_phase_profiled(const std::string& phase);

}  // namespace cudatrace
