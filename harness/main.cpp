// harness: runs CUDA workloads under tracing methods and scores what each method saw
// against the workloads' own ledger. See --help.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/event_io.h"
#include "common/outside_text.h"
#include "harness/stats/bench.h"
#include "harness/catalog.h"
#include "harness/cli.h"
#include "harness/run/host.h"
#include "harness/matrix.h"
#include "harness/out/otlp_export.h"
#include "harness/out/otlp_http.h"
#include "harness/run/process_tree.h"
#include "harness/run/runner.h"
#include "harness/run/safe_files.h"
#include "harness/out/trace_export.h"

using namespace cudatrace;

namespace {

std::string layer_list(const std::vector<std::string>& layers) {
  std::string s;
  for (const auto& l : layers) s += (s.empty() ? "" : ", ") + l;
  return s.empty() ? "observes nothing" : s;
}

void print_list(const HostFacts& host, const Options& opts) {
  std::printf("workloads (built with static and shared cudart unless said; without a GPU, those that can run\n"
              "their host-side path, the calls made until the driver refuses):\n");
  for (const auto& w : workloads()) {
    const std::string why = workload_unavailable(w, host);
    std::string state = why.empty() ? (host.gpu || w.needs_gpu ? "ok" : "ok: host-side path only") : "skip: " + why;
    std::string builds = w.linkages.size() == 1 ? " [" + w.linkages[0] + " only]" : "";
    std::printf("  %-13s %-88s %s\n", w.name.c_str(), (w.summary + builds).c_str(), state.c_str());
  }
  std::printf("\nmethods (--method compared: all but the cost references):\n");
  for (const auto& m : methods()) {
    const auto options = opts.method_options.find(m.name);
    Availability a = availability(m, host, options == opts.method_options.end() ? MethodOptions{} : options->second);
    std::printf("  %-13s %-88s %s\n", m.name.c_str(), m.summary.c_str(), a.ok ? "ok" : ("unavailable: " + a.reason).c_str());
    std::printf("  %-13s   %s; %s\n", "", kind_name(m.kind), layer_list(m.layers).c_str());
    for (const auto& [key, help] : m.options)
      std::printf("  %-13s   --set %s.%s=VALUE: %s\n", "", m.name.c_str(), key.c_str(), help.c_str());
  }
  std::printf("\nGPU: %s\n", host.gpu ? "yes" : ("no (" + host.gpu_reason + ")").c_str());
  std::printf("privileges for eBPF: %s\n", host.root ? "yes" : "no (run with sudo)");
}

// --list --json: what --list prints, for scripts and tests that must not keep their own
// list of methods or workloads.
void print_list_json(const HostFacts& host) {
  nlohmann::json out = {{"v", 1}, {"gpu", host.gpu}, {"gpus", host.gpu_count}, {"root", host.root}};
  if (!host.gpu) out["gpu_reason"] = host.gpu_reason;
  for (const auto& w : workloads()) {
    const std::string why = workload_unavailable(w, host);
    out["workloads"].push_back({{"name", w.name}, {"summary", w.summary}, {"linkages", w.linkages},
                                {"available", why.empty()}, {"reason", why}});
  }
  for (const auto& m : methods()) {
    const Availability a = availability(m, host);
    // Per layer, whether its records name their GPU, and how or why not (schema/README.md).
    nlohmann::json devices = nlohmann::json::object();
    for (const auto& [l, d] : m.devices) devices[l] = {{"named", d.named}, {"how", d.how}};
    out["methods"].push_back({{"name", m.name}, {"summary", m.summary}, {"kind", kind_name(m.kind)},
                              {"layers", m.layers}, {"built", m.built}, {"not_built_reason", m.not_built_reason},
                              {"options", m.options}, {"available", a.ok}, {"reason", a.reason},
                              {"devices", devices}});
  }
  out["method_groups"] = method_groups();
  std::printf("%s\n", out.dump(2).c_str());
}

// --export-otlp DIR [-o FILE] [--otlp-endpoint URL]: every run in DIR as OTLP JSON lines.
// Root writes FILE exclusively and never through a link (the default, DIR/otlp.jsonl, is
// this command's own output and is replaced, in DIR as held open: never through a link
// swapped in for DIR), and hands it to the user who called sudo.
int export_otlp(const Options& opts) {
  const OtlpRuns runs = otlp_run_folders(opts.export_otlp);
  const bool in_dir = opts.otlp_file.empty();
  const std::filesystem::path file = in_dir ? runs.top.shown_path("otlp.jsonl") : opts.otlp_file;
  // Where a failed export's partial file is removed: by its name in DIR held, or FILE's path.
  const std::filesystem::path remove_as = in_dir ? std::filesystem::path(runs.top.path_of("otlp.jsonl")) : file;
  if (in_dir) runs.top.remove_file("otlp.jsonl");
  const int fd = in_dir ? runs.top.create_file("otlp.jsonl") : create_exclusive(file);
  if (const auto user = invoking_user(); user && fchown(fd, user->uid, user->gid) != 0)
    std::fprintf(stderr, "harness: cannot hand %s to %s: %s\n", file.c_str(), user->user.c_str(), std::strerror(errno));
  std::unique_ptr<OtlpHttpSender> sender;
  if (!opts.otlp_endpoint.empty()) sender = std::make_unique<OtlpHttpSender>(opts.otlp_endpoint);
  std::string send_error;
  OtlpStats stats;
  std::vector<std::string> skipped;  // runs that could not be read: the others are still exported
  try {
    EventWriter out(fd, remove_as);  // a failed write removes the partial file
    for (size_t i = 0; i < runs.size(); ++i) {
      bool wrote = false;
      try {
        stats.add(otlp_of_run(runs, i, [&](const std::string& line) {
          wrote = true;
          out.write_line(line);
          if (sender && send_error.empty()) send_error = sender->send(line);
        }));
      } catch (const std::exception& e) {
        if (wrote) throw;  // half a run in the file: the whole export fails
        skipped.push_back(shown(runs.names[i]) + ": " + e.what());
      }
    }
    out.close();
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove(remove_as, ec);  // a run it could not read: no half file left behind either
    throw std::runtime_error(runs.top.named(e.what()));
  }
  std::printf("harness: wrote %s: %zu spans (%zu linked to their launch) of %zu run(s), %zu lines%s\n", file.c_str(),
              stats.spans, stats.linked_spans, stats.runs, stats.lines,
              stats.events_without_time ? (", " + std::to_string(stats.events_without_time) +
                                           " events without a time not exported (counted on their resource)")
                                              .c_str()
                                        : "");
  for (const auto& why : skipped) std::fprintf(stderr, "harness: run not exported: %s\n", why.c_str());
  if (!skipped.empty())
    std::fprintf(stderr, "harness: %zu run(s) of %zu not exported (reasons above); the others are in %s\n", skipped.size(),
                 runs.size(), file.c_str());
  if (!sender) return skipped.empty() ? 0 : 1;
  if (!send_error.empty()) {
    std::fprintf(stderr, "harness: OTLP: %s (the file is complete)\n", send_error.c_str());
    return 1;
  }
  std::printf("harness: OTLP: sent %zu lines to %s (%zu requests, %zu retried)\n", stats.lines, sender->url().c_str(),
              sender->requests(), sender->retries());
  return skipped.empty() ? 0 : 1;
}


// Why the command after "--" cannot be run, in one line, or "" when it can.
std::string command_problem(const std::string& command) {
  if (command.empty()) return "the command after '--' is empty";
  const std::string name = "'" + shown(command) + "'";
  const auto resolved = find_on_path(command);
  std::error_code ec;
  if (!resolved.empty())
    return std::filesystem::is_directory(resolved, ec) ? "cannot run " + name + ": it is a folder, not a program" : "";
  // Not runnable: say whether it is missing or there but not executable.
  std::vector<std::filesystem::path> candidates;
  if (command.find('/') != std::string::npos) {
    candidates.push_back(command);
  } else {
    const char* path = std::getenv("PATH");
    const std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    for (size_t start = 0; start <= dirs.size();) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      candidates.push_back(std::filesystem::path(end > start ? dirs.substr(start, end - start) : ".") / command);
      start = end + 1;
    }
  }
  for (const auto& c : candidates) {
    struct stat st {};
    if (stat(c.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) return "cannot run " + name + ": it is a folder, not a program";
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    return "cannot run " + name + ": " + shown(c.string()) + " is not executable (mode " + mode + ")";
  }
  return "cannot find " + name + " (not a path to an executable, nor on PATH)";
}

}  // namespace

int main(int argc, char** argv) {
  // Everything printed to the console may hold what the traced program named or wrote.
  make_stderr_terminal_safe();
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> workload_names, method_names;
  for (const auto& w : workloads()) workload_names.push_back(w.name);
  for (const auto& m : methods()) method_names.push_back(m.name);

  Options opts;
  try {
    opts = parse_cli(args, workload_names, method_names, method_groups());
  } catch (const UsageError& e) {
    std::fprintf(stderr, "harness: %s (see --help)\n", e.what());
    return 2;
  }
  if (opts.help) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  // Method settings are checked now, not when the first run of that method comes up.
  for (const auto& [name, settings] : opts.method_options) {
    const Method& m = *find_method(name);
    for (const auto& [key, value] : settings) {
      if (!m.options.count(key)) {
        std::string valid;
        for (const auto& [k, help] : m.options) valid += (valid.empty() ? "" : ", ") + k;
        std::fprintf(stderr, "harness: --set: method %s has no setting '%s' (%s) (see --help)\n", name.c_str(),
                     key.c_str(), valid.empty() ? "it takes none" : ("valid: " + valid).c_str());
        return 2;
      }
    }
    try {
      if (m.make) (void)m.make(HostFacts{}, settings);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "harness: --set: %s (see --help)\n", e.what());
      return 2;
    }
  }
  if (!opts.export_trace.empty()) {
    try {
      if (std::filesystem::is_symlink(opts.export_trace))
        throw std::runtime_error(shown(opts.export_trace.string()) + " is a link: give the folder it names");
      if (!std::filesystem::is_directory(opts.export_trace))
        throw std::runtime_error("no such run folder: " + opts.export_trace.string());
      if (!std::filesystem::exists(opts.export_trace / "run.json"))
        throw std::runtime_error(opts.export_trace.string() +
                                 " is not a run folder (no run.json): give results/<run-id>/runs/<combo>");
      size_t n = export_trace(opts.export_trace);
      std::printf("harness: wrote %s (%zu trace events)\n", (opts.export_trace / "trace.json").c_str(), n);
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "harness: %s\n", e.what());
      return 2;
    }
  }
  if (!opts.export_jsonl.empty()) {
    try {
      return export_jsonl(opts.export_jsonl, opts.otlp_file);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "harness: %s\n", shown(e.what()).c_str());
      return 2;
    }
  }
  if (!opts.export_otlp.empty()) {
    try {
      return export_otlp(opts);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "harness: %s\n", e.what());
      return 2;
    }
  }
  // Workload flags are checked now too, against what each workload's --help lists.
  for (const auto& [name, args] : opts.workload_args) {
    const auto valid = workload_flags(self_prefix(), *find_workload(name));
    if (valid.empty()) continue;  // binary missing: the run says so
    for (const auto& a : args) {
      const std::string key = a.substr(2, a.find('=') - 2);
      if (std::find(valid.begin(), valid.end(), key) != valid.end()) continue;
      std::string list;
      for (const auto& v : valid) list += (list.empty() ? "" : ", ") + v;
      std::fprintf(stderr, "harness: --set: workload %s has no flag '%s' (valid: %s) (see --help)\n", name.c_str(),
                   key.c_str(), list.c_str());
      return 2;
    }
  }
  HostFacts host = probe_host(self_prefix());
  if (opts.list) {
    opts.json ? print_list_json(host) : print_list(host, opts);
    return 0;
  }
  try {
    (void)invoking_user();  // SUDO_UID/SUDO_GID are checked before anything runs
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "harness: %s\n", e.what());
    return 2;
  }
  if (!opts.command.empty()) {
    const std::string why = command_problem(opts.command[0]);
    if (!why.empty()) {
      std::fprintf(stderr, "harness: %s\n", why.c_str());
      return 2;
    }
    opts.command[0] = std::filesystem::absolute(find_on_path(opts.command[0])).string();
  }
  install_interrupt_handler();
  start_janitor();     // before the next line: the janitor must stay outside our tree
  become_subreaper();  // what a target leaves running comes back to us, to be killed
  try {
    std::vector<std::string> command_line(argv, argv + argc);
    return opts.bench ? run_bench(opts, host, command_line) : run_matrix(opts, host, command_line);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "harness: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "harness: %s\n", e.what());
    return 1;
  }
}
