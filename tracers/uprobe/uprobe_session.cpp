#include "tracers/uprobe/uprobe_session.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "tracers/ebpf/libbpf_log.h"
#include "tracers/ebpf/percpu_counters.h"
#include "tracers/ebpf/process_tree.h"
#include "uprobe.skel.h"

namespace cudatrace {

namespace {

// uprobe_multi (Linux 6.6): one link probes many offsets of one file, and detaching it
// waits for the kernel's grace period once, not once per probe (with per-probe links,
// detaching hundreds of probes took most of a minute: the card has the figure). This libbpf (1.1) predates it: the link is made
// with the bpf syscall directly, the layout as in the kernel's uapi bpf.h.
constexpr uint32_t kTraceUprobeMulti = 48;  // enum bpf_attach_type BPF_TRACE_UPROBE_MULTI
constexpr uint32_t kUprobeMultiReturn = 1;  // BPF_F_UPROBE_MULTI_RETURN

struct LinkCreateUprobeMulti {
  uint32_t prog_fd;
  uint32_t target_fd;
  uint32_t attach_type;
  uint32_t flags;
  uint64_t path;
  uint64_t offsets;
  uint64_t ref_ctr_offsets;
  uint64_t cookies;
  uint32_t cnt;
  uint32_t multi_flags;
  uint32_t pid;
  uint32_t pad;
};
static_assert(sizeof(LinkCreateUprobeMulti) == 64);

// What the kernel opens to probe the file behind one of our descriptors.
std::string fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// Closing a uprobe_multi link returns only after the kernel has waited out two grace
// periods (RCU tasks trace, then the uretprobe SRCU: uprobe_unregister_sync()), whatever
// the link's size. Closed one after another, a file's entry and return links and every
// other file's wait in turn, and each pause of the per-call benchmark (tens a process)
// paid that wait once per link. Closed on threads of their own, the waits overlap.
void close_links(std::vector<int>& fds) {
  if (fds.size() == 1) close(fds[0]);
  if (fds.size() > 1) {
    std::vector<std::thread> closing;
    closing.reserve(fds.size());
    for (int fd : fds) {
      try {
        closing.emplace_back([fd] { close(fd); });
      } catch (const std::system_error&) {
        close(fd);  // no thread to be had: this one waits in turn
      }
    }
    for (auto& t : closing) t.join();
  }
  fds.clear();
}

}  // namespace

void UprobeSession::open_and_load(bool multi) {
  skel_ = uprobe_bpf__open();
  if (!skel_) throw std::runtime_error(std::string("cannot open the BPF object: ") + std::strerror(errno));
  skel_->rodata->mode = mode_;
  if (int err = bpf_map__set_max_entries(skel_->maps.calls, uint32_t(ring_bytes_)); err)
    throw std::runtime_error("ring buffer size " + std::to_string(ring_bytes_) + ": " + std::strerror(-err));
  if (multi) {
    for (bpf_program* p : {skel_->progs.call_enter, skel_->progs.call_exit, skel_->progs.loader_notice})
      bpf_program__set_expected_attach_type(p, static_cast<bpf_attach_type>(kTraceUprobeMulti));
  }
  if (int err = uprobe_bpf__load(skel_); err) {
    std::string why = last_libbpf_message();
    uprobe_bpf__destroy(skel_);
    skel_ = nullptr;
    throw std::runtime_error(std::string("cannot load the BPF programs (") + std::strerror(-err) + ")" +
                             (why.empty() ? "" : ": " + why));
  }
  multi_ = multi;
}

UprobeSession::UprobeSession(uprobe_mode mode, uint64_t ring_bytes) : mode_(mode), ring_bytes_(ring_bytes) {
  capture_libbpf_messages();
  try {
    open_and_load(true);
  } catch (const std::runtime_error&) {
    last_libbpf_message();
    open_and_load(false);  // a kernel before 6.6: per-probe links
  }
  // Children and thread exits: the process-tree filter and the per-thread frame stacks.
  skel_->links.on_fork = bpf_program__attach(skel_->progs.on_fork);
  skel_->links.on_exit = bpf_program__attach(skel_->progs.on_exit);
  if (!skel_->links.on_fork || !skel_->links.on_exit) {
    std::string why = last_libbpf_message();
    uprobe_bpf__destroy(skel_);
    skel_ = nullptr;
    throw std::runtime_error("cannot attach the fork/exit tracepoints: " + why);
  }
}

UprobeSession::~UprobeSession() {
  stop();
  spool_.reset();
  if (skel_) uprobe_bpf__destroy(skel_);
}

int UprobeSession::link_multi(const std::string& binary, const uint64_t* offsets, const uint64_t* cookies, size_t n,
                              bool ret, bpf_program* prog) {
  LinkCreateUprobeMulti attr{};
  if (!prog) prog = ret ? skel_->progs.call_exit : skel_->progs.call_enter;
  attr.prog_fd = uint32_t(bpf_program__fd(prog));
  attr.attach_type = kTraceUprobeMulti;
  attr.path = reinterpret_cast<uint64_t>(binary.c_str());
  attr.offsets = reinterpret_cast<uint64_t>(offsets);
  attr.cookies = reinterpret_cast<uint64_t>(cookies);
  attr.cnt = uint32_t(n);
  attr.multi_flags = ret ? kUprobeMultiReturn : 0;
  return int(syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof attr));
}

std::vector<std::pair<uint64_t, std::string>> UprobeSession::attach(const std::string& binary,
                                                                    const std::vector<uint64_t>& offsets,
                                                                    const std::vector<uint64_t>& cookies) {
  std::lock_guard lock(probes_mutex_);
  std::vector<std::pair<uint64_t, std::string>> failed;
  const std::vector<bool> directions = this->directions();
  if (multi_) {
    CallProbes probed;
    probed.fd = open(binary.c_str(), O_RDONLY | O_CLOEXEC);
    if (probed.fd < 0) {
      for (uint64_t o : offsets) failed.push_back({o, std::string("cannot open: ") + std::strerror(errno)});
      return failed;
    }
    const std::string file = fd_path(probed.fd);
    auto link = [&](const uint64_t* o, const uint64_t* c, size_t n, bool ret) {
      const int fd = link_multi(file, o, c, n, ret);
      if (fd >= 0) multi_fds_.push_back(fd);
      return fd >= 0;
    };
    bool all = true;
    for (bool ret : directions) all = all && link(offsets.data(), cookies.data(), offsets.size(), ret);
    if (all) {
      probes_ += offsets.size() * directions.size();
      probed.offsets = offsets;
      probed.cookies = cookies;
      call_probes_.push_back(std::move(probed));
      return failed;
    }
    // One offset the kernel refuses fails the whole link: find it, probing one by one.
    for (size_t i = 0; i < offsets.size(); ++i) {
      bool both = true;
      for (bool ret : directions) {
        if (link(&offsets[i], &cookies[i], 1, ret)) {
          ++probes_;
        } else {
          failed.push_back({offsets[i], std::strerror(errno)});
          both = false;
          break;
        }
      }
      if (both) {
        probed.offsets.push_back(offsets[i]);
        probed.cookies.push_back(cookies[i]);
      }
    }
    if (probed.offsets.empty())
      close(probed.fd);
    else
      call_probes_.push_back(std::move(probed));
    return failed;
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    for (bool ret : directions) {
      LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookies[i], .retprobe = ret);
      bpf_link* link = bpf_program__attach_uprobe_opts(ret ? skel_->progs.call_exit : skel_->progs.call_enter, -1,
                                                       binary.c_str(), offsets[i], &opts);
      if (!link) {
        std::string why = std::strerror(errno);
        std::string log = last_libbpf_message();
        failed.push_back({offsets[i], why + (log.empty() ? "" : " (" + log + ")")});
        break;
      }
      links_.push_back(link);
      ++probes_;
    }
  }
  return failed;
}

std::string UprobeSession::attach_loader(const std::string& ld_so, uint64_t offset, int64_t to_r_debug) {
  const uint64_t cookie = uint64_t(to_r_debug);
  if (multi_) {
    const int fd = link_multi(ld_so, &offset, &cookie, 1, false, skel_->progs.loader_notice);
    if (fd < 0) return std::strerror(errno);
    std::lock_guard lock(probes_mutex_);
    loader_fds_.push_back(fd);
    return {};
  }
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie);
  bpf_link* link = bpf_program__attach_uprobe_opts(skel_->progs.loader_notice, -1, ld_so.c_str(), offset, &opts);
  if (!link) {
    std::string why = std::strerror(errno);
    std::string log = last_libbpf_message();
    return why + (log.empty() ? "" : " (" + log + ")");
  }
  links_.push_back(link);
  return {};
}

int UprobeSession::loads_fd() const { return bpf_map__fd(skel_->maps.loads); }

void UprobeSession::trace_process(pid_t pid) { trace_process_tree(skel_->maps.traced, pid); }

void UprobeSession::start(const std::filesystem::path& spool, uint64_t max_bytes) {
  spool_ = std::make_unique<RingSpool>(bpf_map__fd(skel_->maps.calls), sizeof(uprobe_call), spool, max_bytes);
}

std::string UprobeSession::pause_calls(bool paused) {
  std::lock_guard lock(probes_mutex_);
  if (!multi_) return "per-probe links (a kernel before 6.6 has no uprobe_multi): detaching them takes seconds";
  if (paused == paused_) return {};
  if (paused) {
    close_links(multi_fds_);
    paused_ = true;
    return {};
  }
  const std::vector<bool> directions = this->directions();
  for (const CallProbes& p : call_probes_)
    for (bool ret : directions) {
      const int fd = link_multi(fd_path(p.fd), p.offsets.data(), p.cookies.data(), p.offsets.size(), ret);
      if (fd < 0) return "cannot attach again (" + std::to_string(p.offsets.size()) + " probes): " + std::strerror(errno);
      multi_fds_.push_back(fd);
    }
  paused_ = false;
  return {};
}

void UprobeSession::detach_all() {
  std::lock_guard lock(probes_mutex_);
  multi_fds_.insert(multi_fds_.end(), loader_fds_.begin(), loader_fds_.end());
  loader_fds_.clear();
  close_links(multi_fds_);
  for (const CallProbes& p : call_probes_) close(p.fd);
  call_probes_.clear();
  for (bpf_link* l : links_) bpf_link__destroy(l);
  links_.clear();
}

void UprobeSession::stop() {
  // Probes first, so that nothing new arrives; then what is left in the ring.
  detach_all();
  if (spool_) spool_->stop();
}

std::vector<uint64_t> UprobeSession::losses() const {
  return sum_percpu_counters(skel_ ? skel_->maps.lost : nullptr, UPROBE_LOST_KINDS);
}

}  // namespace cudatrace
