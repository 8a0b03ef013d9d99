#include "tracers/cupti/cupti_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "cupti.skel.h"
#include "tracers/ebpf/libbpf_log.h"
#include "tracers/ebpf/percpu_counters.h"
#include "tracers/ebpf/process_tree.h"

namespace cudatrace {

CuptiSession::CuptiSession(uint64_t ring_bytes) {
  capture_libbpf_messages();
  skel_ = cupti_bpf__open();
  if (!skel_) throw std::runtime_error(std::string("cannot open the BPF object: ") + std::strerror(errno));
  if (int err = bpf_map__set_max_entries(skel_->maps.records, uint32_t(ring_bytes)); err) {
    cupti_bpf__destroy(skel_);
    skel_ = nullptr;
    throw std::runtime_error("ring buffer size " + std::to_string(ring_bytes) + ": " + std::strerror(-err));
  }
  if (int err = cupti_bpf__load(skel_); err) {
    std::string why = last_libbpf_message();
    cupti_bpf__destroy(skel_);
    skel_ = nullptr;
    throw std::runtime_error(std::string("cannot load the BPF programs (") + std::strerror(-err) + ")" +
                             (why.empty() ? "" : ": " + why));
  }
  skel_->links.on_fork = bpf_program__attach(skel_->progs.on_fork);
  if (!skel_->links.on_fork) {
    std::string why = last_libbpf_message();
    cupti_bpf__destroy(skel_);
    skel_ = nullptr;
    throw std::runtime_error("cannot attach the fork tracepoint: " + why);
  }
}

CuptiSession::~CuptiSession() {
  stop();
  spool_.reset();
  if (skel_) cupti_bpf__destroy(skel_);
}

void CuptiSession::attach(const std::filesystem::path& library, bool per_call) {
  // The api_enter probe stays unattached: a probe hit is the most expensive part of the
  // method (the card has the figure), and the exit (or the batch) carries the entry time
  // the library took. A user's own script
  // may still attach it.
  const std::pair<bpf_program*, const char*> calls =
      per_call ? std::pair<bpf_program*, const char*>{skel_->progs.api_exit, "api_exit"}
               : std::pair<bpf_program*, const char*>{skel_->progs.api_batch, "api_batch"};
  const std::pair<bpf_program*, const char*> probes[] = {calls,
                                                         {skel_->progs.kernel, "kernel"},
                                                         {skel_->progs.activity_dropped, "activity_dropped"},
                                                         {skel_->progs.status, "status"},
                                                         {skel_->progs.summary, "summary"}};
  for (const auto& [prog, name] : probes) {
    // pid -1: the library is not mapped yet (the child has not exec'd); the BPF side keeps
    // only the traced processes.
    bpf_link* link = bpf_program__attach_usdt(prog, -1, library.c_str(), "cudatrace", name, nullptr);
    if (!link) {
      const int err = errno;
      std::string why = last_libbpf_message();
      throw std::runtime_error("cannot attach to USDT probe cudatrace:" + std::string(name) + " in " + library.string() +
                               " (" + std::strerror(err) + ")" + (why.empty() ? "" : ": " + why));
    }
    links_.push_back(link);
  }
}

void CuptiSession::trace_process(pid_t pid) { trace_process_tree(skel_->maps.traced, pid); }

void CuptiSession::start(const std::filesystem::path& spool, uint64_t max_bytes) {
  // A batch's sample: its clock record and CUPTI_BATCH calls.
  spool_ = std::make_unique<RingSpool>(bpf_map__fd(skel_->maps.records), sizeof(cupti_record), spool, max_bytes,
                                       sizeof(cupti_batch) / sizeof(cupti_record));
}

void CuptiSession::stop() {
  for (bpf_link* l : links_) bpf_link__destroy(l);
  links_.clear();
  if (spool_) spool_->stop();
}

std::vector<uint64_t> CuptiSession::losses() const {
  return sum_percpu_counters(skel_ ? skel_->maps.lost : nullptr, CUPTI_LOST_KINDS);
}

}  // namespace cudatrace
