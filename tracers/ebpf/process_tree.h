#pragma once
// The user-space half of tracers/ebpf/process_tree.bpf.h: seed a session's `traced` map with the
// target, whose forks the BPF side then adds.
#include <sys/types.h>

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cudatrace {

inline void trace_process_tree(const bpf_map* traced, pid_t pid) {
  __u32 key = __u32(pid);
  __u8 one = 1;
  if (bpf_map__update_elem(traced, &key, sizeof key, &one, sizeof one, BPF_ANY) != 0)
    throw std::runtime_error(std::string("cannot add the target to the traced set: ") + std::strerror(errno));
}

}  // namespace cudatrace
