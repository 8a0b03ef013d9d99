#include "tracers/strace/strace_tracer.h"

#include <fstream>

#include "common/clock.h"
#include "common/event_io.h"
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
                                   int64_t realtime_minus_monotonic_ns) {
  TracerReport report;
  report.layers = {layer::kSyscall};
  std::ifstream in = open_untrusted(strace_file);
  if (!in) {
    report.error = "strace wrote no output (" + strace_file.string() + ")";
    return report;
  }
  StraceParser parser(realtime_minus_monotonic_ns);
  std::string line;
  while (std::getline(in, line)) parser.feed(line);
  std::vector<Event> events = parser.finish();
  EventWriter out(events_file);
  int64_t nvidia_ioctls = 0;
  for (const auto& e : events) {
    out.write(e);
    nvidia_ioctls += e.args.contains("nvidia");
  }
  out.close();
  const StraceStats& s = parser.stats();
  // ptrace stops the thread at every syscall, so strace itself drops nothing; what can
  // go wrong is a line we could not read, or a call still open when the thread died.
  report.loss = {{"unparsed_lines", s.unparsed}, {"unfinished_at_end", s.unfinished_at_end},
                 {"orphan_resumed", s.orphan_resumed}};
  report.notes = {{"lines", s.lines},         {"syscalls", s.syscalls}, {"signals", s.signals},
                  {"nvidia_ioctls", nvidia_ioctls}, {"unparsed_examples", s.unparsed_examples}};
  return report;
}

TracerReport StraceTracer::finish(const std::filesystem::path& run_dir) {
  TracerReport report = convert_strace_output(output_, run_dir / "events.jsonl", clock_.realtime_minus_monotonic_ns);
  report.notes["strace"] = strace_.string();
  report.notes["realtime_minus_monotonic_ns"] = clock_.realtime_minus_monotonic_ns;
  report.notes["clock_offset_uncertainty_ns"] = clock_.uncertainty_ns;
  report.match_slack_ns = clock_.uncertainty_ns;
  return report;
}

}  // namespace cudatrace
