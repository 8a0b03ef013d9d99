#pragma once
// What the eBPF methods' loaders share about libbpf itself: its messages go to a buffer
// (not to the harness's stderr), so that a failure can be reported in one line.
#include <string>

namespace cudatrace {

// Routes libbpf's warnings into the buffer; idempotent. Also lifts the open-files limit,
// since every probe holds a descriptor or two.
void capture_libbpf_messages();
// The last line libbpf printed since the previous call (the one that says most), emptied.
std::string last_libbpf_message();

}  // namespace cudatrace
