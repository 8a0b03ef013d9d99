#include "tracers/strace/strace_tracer.h"

#include <fstream>

#include "common/bounded_lines.h"
#include "common/clock.h"
#include "common/event_io.h"
#include "common/event_store.h"
#include "common/untrusted_file.h"
#include "tracers/strace/strace_parser.h"

namespace cudatrace {

std::vector<std::string> StraceTracer::strace_args(const std::filesystem::path& strace,
                                                   const std::filesystem::path& output) {
  return {strace.string(),
          "-f",                               // children and threads
          "-qq",                              // no attach/exit chatter in the file
          "-y",                               // paths of file descriptors (/dev/nvidiactl)
          "-X", "raw",                        // request codes as numbers: we decode NVIDIA's
          "--absolute-timestamps=unix,ns",    // entry time, CLOCK_REALTIME, ns
          "--syscall-times=ns",               // time spent in each syscall
          "-o", output.string(),
          "--"};
}

void StraceTracer::prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) {
  output_ = (target.writable_dir.empty() ? run_dir : target.writable_dir) / "strace.txt";
  // strace stamps CLOCK_REALTIME; the ledger, CLOCK_MONOTONIC.
  clock_ = realtime_minus_monotonic();
  std::vector<std::string> argv = strace_args(strace_, output_);
  argv.insert(argv.end(), launch.argv.begin(), launch.argv.end());
  launch.argv = std::move(argv);
  launch.wrapper = true;  // strace follows the program's children: it ends when they do
}

TracerReport convert_strace_output(const std::filesystem::path& strace_file, const std::filesystem::path& events_file,
                                   int64_t realtime_minus_monotonic_ns, uint64_t max_bytes) {
  TracerReport report;
  report.layers = {layer::kSyscall};
  // The program can replace strace's output (it is in the program's folder): read with a
  // bound, the rest counted as loss. Each line becomes an event as it is read and goes
  // straight to the store, so the bound is on disk and time, not on memory.
  BoundedLines in(strace_file, max_bytes);
  if (!in.is_open()) {
    report.error = "strace wrote no output (" + strace_file.string() + ": " + in.why() + ")";
    return report;
  }
  EventStoreWriter out(events_file);
  int64_t nvidia_ioctls = 0;
  StraceParser parser(realtime_minus_monotonic_ns, [&](Event&& e) {
    nvidia_ioctls += e.args.contains("nvidia");
    out.write(e);
  });
  std::string line;
  while (in.next(line)) parser.feed(line);  // a cut line does not parse: counted as unparsed
  parser.finish();
  out.close();
  const StraceStats& s = parser.stats();
  // ptrace stops the thread at every syscall, so strace itself drops nothing; what can
  // go wrong is a line we could not read, or a call still open when the thread died.
  report.loss = {{"unparsed_lines", s.unparsed}, {"unfinished_at_end", s.unfinished_at_end},
                 {"orphan_resumed", s.orphan_resumed}, {"over_bound_bytes", int64_t(in.unread_bytes())},
                 {"threads_of_unknown_process", s.process_unknown}};
  report.notes = {{"lines", s.lines},         {"syscalls", s.syscalls}, {"signals", s.signals},
                  {"nvidia_ioctls", nvidia_ioctls}, {"unparsed_examples", nlohmann::json::array()}};
  for (const auto& x : s.unparsed_examples) report.notes["unparsed_examples"].push_back(strace_file.filename().string() + " " + x);
  if (in.unread_bytes())
    report.notes["over_bound"] = strace_file.filename().string() + " held more than " +
                                 std::to_string(max_bytes) + " bytes (--max-trace-bytes): the " +
                                 std::to_string(in.unread_bytes()) + " bytes past that were not read (over_bound_bytes)";
  return report;
}

TracerReport StraceTracer::finish(const std::filesystem::path& run_dir) {
  TracerReport report =
      convert_strace_output(output_, run_dir / kEventsFile, clock_.realtime_minus_monotonic_ns, max_bytes_);
  report.notes["strace"] = strace_.string();
  report.notes["realtime_minus_monotonic_ns"] = clock_.realtime_minus_monotonic_ns;
  report.notes["clock_offset_uncertainty_ns"] = clock_.uncertainty_ns;
  report.match_slack_ns = clock_.uncertainty_ns;
  return report;
}

}  // namespace cudatrace
