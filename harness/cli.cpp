#include "harness/cli.h"

#include <climits>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "common/bounded_lines.h"
#include "common/outside_text.h"
#include "harness/out/otlp_http.h"
#include "harness/score/result_check.h"
#include "harness/run/safe_files.h"

namespace cudatrace {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// "a,b", "all" or a group's name -> names, each checked against `valid`; duplicates
// dropped, order kept. "-a" takes a name (or a group) out wherever it stands, so that a
// script names a group and what it leaves out of it, never a copy of the group.
std::vector<std::string> name_list(const std::string& what, const std::string& value,
                                   const std::vector<std::string>& valid,
                                   const std::map<std::string, std::vector<std::string>>& groups = {},
                                   std::vector<std::string>* taken_out = nullptr) {
  std::map<std::string, std::vector<std::string>> names_of = groups;
  names_of.try_emplace("all", valid);
  std::string group_names;
  for (const auto& [g, members] : names_of) group_names += ", " + g;
  std::vector<std::string> out, removed;
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(',', start);
    if (end == std::string::npos) end = value.size();
    std::string name = value.substr(start, end - start);
    start = end + 1;
    const bool remove = !name.empty() && name[0] == '-';
    if (remove) name.erase(0, 1);
    std::vector<std::string>& into = remove ? removed : out;
    if (auto g = names_of.find(name); g != names_of.end()) {
      for (const auto& v : g->second)
        if (std::find(into.begin(), into.end(), v) == into.end()) into.push_back(v);
      continue;
    }
    if (std::find(valid.begin(), valid.end(), name) == valid.end())
      throw UsageError("unknown " + what + " '" + name + "' (valid: " + join(valid) + group_names + ")");
    if (std::find(into.begin(), into.end(), name) == into.end()) into.push_back(name);
  }
  std::erase_if(out, [&](const std::string& n) {
    const bool gone = std::find(removed.begin(), removed.end(), n) != removed.end();
    if (gone && taken_out) taken_out->push_back(n);
    return gone;
  });
  if (out.empty()) throw UsageError("no " + what + " left in '" + value + "'");
  return out;
}

// A positive, finite decimal number ("2.5", "1e3"): strtod alone also takes "0x10", "inf"
// and leading blanks, which a user did not mean as seconds.
double positive_number(const std::string& flag, const std::string& value) {
  const bool decimal = !value.empty() && (std::isdigit(static_cast<unsigned char>(value[0])) || value[0] == '.') &&
                       value.find_first_not_of("0123456789.eE+-") == std::string::npos;
  char* end = nullptr;
  const double v = decimal ? std::strtod(value.c_str(), &end) : 0;
  if (!decimal || *end || !(v > 0) || !std::isfinite(v))
    throw UsageError(flag + " wants a positive number, got '" + shown(value, 40) + "'");
  return v;
}

}  // namespace

std::string create_out_folder(const std::filesystem::path& out, const std::string& suffix, std::filesystem::path& root,
                              std::vector<std::filesystem::path>* created) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(out, ec);
  try {
    return create_run_folder(out, suffix, root, created);
  } catch (const WriteError& e) {
    if (existed) throw;  // a results folder that exists and cannot take a run: the run's failure
    throw UsageError(std::string("--out: ") + e.what());
  }
}

// "512M", "4G", "1048576": a size in bytes, K/M/G/T as powers of 1024; nothing else.
uint64_t byte_count(const std::string& flag, const std::string& value) {
  static const std::string kUnits = "KMGT";
  size_t digits = 0;
  while (digits < value.size() && std::isdigit(static_cast<unsigned char>(value[digits]))) ++digits;
  const std::string unit = value.substr(digits);
  const size_t u = unit.size() == 1 ? kUnits.find(char(std::toupper(static_cast<unsigned char>(unit[0])))) : std::string::npos;
  if (digits == 0 || digits > 15 || (!unit.empty() && u == std::string::npos))
    throw UsageError(flag + " wants a size in bytes, with K, M, G or T for powers of 1024 (e.g. 64G), got '" + value + "'");
  uint64_t n = std::stoull(value.substr(0, digits));
  for (size_t i = 0; !unit.empty() && i <= u; ++i) {
    if (n > (UINT64_MAX >> 10)) throw UsageError(flag + ": '" + value + "' is too large");
    n <<= 10;
  }
  if (n < (uint64_t(1) << 20)) throw UsageError(flag + " wants at least 1M, got '" + value + "'");
  return n;
}

namespace {
// The run folders and their files go a few hundred bytes below --out: refuse, up front, a
// folder whose paths would pass the system's limits, rather than fail every run on
// ENAMETOOLONG with root-owned folders left half made.
void check_out_length(const std::string& value) {
  constexpr size_t kBelowOut = 512;  // <run-id>/runs/<combination>.rN/target/<file>, with room
  std::error_code ec;
  const std::string absolute = std::filesystem::absolute(value, ec).string();
  if (absolute.size() + kBelowOut > PATH_MAX)
    throw UsageError("--out " + shown(value, 60) + " is " + std::to_string(absolute.size()) +
                     " bytes long as an absolute path: the run folders below it would pass the system's path limit of " +
                     std::to_string(PATH_MAX) + " bytes (at most " + std::to_string(PATH_MAX - kBelowOut) + ")");
  for (const auto& part : std::filesystem::path(value))
    if (part.string().size() > NAME_MAX)
      throw UsageError("--out " + shown(value, 60) + " has a folder name of " + std::to_string(part.string().size()) +
                       " bytes, over the system's limit of " + std::to_string(NAME_MAX));
}
}  // namespace

Options parse_cli(const std::vector<std::string>& args, const std::vector<std::string>& workload_names,
                  const std::vector<std::string>& method_names,
                  const std::map<std::string, std::vector<std::string>>& method_groups) {
  Options o;
  std::string workload_arg = "all", method_arg = "all", linkage_arg = "both";
  bool workload_given = false, linkage_given = false, method_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--") {
      o.command.assign(args.begin() + long(i) + 1, args.end());
      if (o.command.empty()) throw UsageError("'--' must be followed by a command to trace");
      break;
    }
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
    if (a == "--list") {
      o.list = true;
      continue;
    }
    if (a == "--no-report") {
      o.no_report = true;
      continue;
    }
    if (a == "--json") {
      o.json = true;
      continue;
    }
    if (a == "--bench") {
      o.bench = true;
      continue;
    }
    if (a == "--cost") {
      o.cost = true;
      continue;
    }
    if (a == "--no-baseline") {
      o.baseline = false;
      continue;
    }
    if (a == "--strict-result") {
      o.strict_result = true;
      continue;
    }
    std::string flag = a, value;
    bool inline_value = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
      inline_value = true;
    }
    static const std::vector<std::string> with_value{"--workload", "--method",       "--linkage",     "--reps",
                                                     "--out",      "--timeout",      "--set",         "--export-trace",
                                                     "--export-otlp", "--export-jsonl", "--otlp-endpoint", "-o",
                                                     "--run-id-file", "--agree-with", "--time-budget",
                                                     "--stall-timeout", "--max-trace-bytes", "--result", "--seed"};
    if (std::find(with_value.begin(), with_value.end(), flag) == with_value.end())
      throw UsageError("unknown option '" + a + "'");
    if (!inline_value) {
      if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
      value = args[++i];
    }
    if (flag == "--workload") {  // repeated: the lists add up
      workload_arg = workload_given ? workload_arg + "," + value : value;
      workload_given = true;
    } else if (flag == "--method") {
      method_arg = method_given ? method_arg + "," + value : value;
      method_given = true;
    } else if (flag == "--linkage") {
      linkage_arg = value;
      linkage_given = true;
    } else if (flag == "--reps") {
      const bool digits = !value.empty() && value.size() <= 4 && value.find_first_not_of("0123456789") == std::string::npos;
      const int r = digits ? std::stoi(value) : 0;
      if (r < 1 || r > 1000) throw UsageError("--reps wants a whole number from 1 to 1000, got '" + shown(value, 40) + "'");
      o.reps = r;
      o.reps_given = true;
    } else if (flag == "--out") {
      if (value.empty()) throw UsageError("--out needs a folder");
      check_out_length(value);
      o.out = value;
    } else if (flag == "--export-trace") {
      if (value.empty()) throw UsageError("--export-trace needs a run folder (results/<run-id>/runs/<combo>)");
      o.export_trace = value;
    } else if (flag == "--export-otlp") {
      if (value.empty()) throw UsageError("--export-otlp needs a results folder (results/<run-id>) or one of its runs");
      o.export_otlp = value;
    } else if (flag == "--export-jsonl") {
      if (value.empty()) throw UsageError("--export-jsonl needs a run folder (results/<run-id>/runs/<combo>)");
      o.export_jsonl = value;
    } else if (flag == "--agree-with") {
      if (value.empty()) throw UsageError("--agree-with needs an earlier bench run's folder (results/<run-id>)");
      o.agree_with = value;
    } else if (flag == "--run-id-file") {
      if (value.empty()) throw UsageError("--run-id-file needs a file name");
      o.run_id_file = value;
    } else if (flag == "-o") {
      if (value.empty()) throw UsageError("-o needs a file name");
      o.otlp_file = value;
    } else if (flag == "--otlp-endpoint") {
      try {
        (void)otlp_traces_url(value);
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
      o.otlp_endpoint = value;
    } else if (flag == "--time-budget") {
      o.time_budget_s = positive_number(flag, value);
    } else if (flag == "--timeout") {
      o.timeout_s = positive_number(flag, value);
      if (o.timeout_s < 0.001 || o.timeout_s > 7 * 86400.0)
        throw UsageError("--timeout wants seconds from 0.001 to 604800 (7 days), got '" + value + "'");
    } else if (flag == "--result") {
      try {
        (void)result_pattern(value);
      } catch (const std::regex_error& e) {
        throw UsageError("--result " + shown(value, 80) + " is not a regular expression (" + e.what() + ")");
      }
      if (value.empty()) throw UsageError("--result needs a regular expression, e.g. 'loss=([0-9.]+)'");
      o.result = value;
    } else if (flag == "--seed") {
      o.seed = parse_uint64(value);
      if (!o.seed) throw UsageError("--seed wants a whole number from 0 to 2^64-1, got '" + shown(value, 40) + "'");
    } else if (flag == "--max-trace-bytes") {
      o.max_trace_bytes = byte_count(flag, value);
    } else if (flag == "--stall-timeout") {
      o.stall_timeout_s = positive_number(flag, value);
      if (*o.stall_timeout_s < 0.5 || *o.stall_timeout_s > 7 * 86400.0)
        throw UsageError("--stall-timeout wants seconds from 0.5 to 604800 (7 days), got '" + value + "'");
    } else if (flag == "--set") {
      auto dot = value.find('.'), eq = value.find('=');
      if (dot == std::string::npos || eq == std::string::npos || eq < dot || dot == 0 || eq == dot + 1)
        throw UsageError("--set wants WORKLOAD.FLAG=VALUE or METHOD.KEY=VALUE, e.g. --set vecadd.iters=1000, got '" +
                         value + "'");
      std::string owner = value.substr(0, dot);
      if (std::find(workload_names.begin(), workload_names.end(), owner) != workload_names.end())
        o.workload_args[owner].push_back("--" + value.substr(dot + 1));
      else if (std::find(method_names.begin(), method_names.end(), owner) != method_names.end())
        o.method_options[owner][value.substr(dot + 1, eq - dot - 1)] = value.substr(eq + 1);
      else
        throw UsageError("--set: '" + owner + "' is neither a workload (" + join(workload_names) + ") nor a method (" +
                         join(method_names) + ")");
    }
  }
  if (o.json && !o.list) throw UsageError("--json goes with --list");
  if (!o.otlp_file.empty() && o.export_otlp.empty() && o.export_jsonl.empty())
    throw UsageError("-o names the file of --export-otlp or --export-jsonl, neither of which was given");
  if (!o.export_jsonl.empty() && o.otlp_file.empty())
    throw UsageError("--export-jsonl writes where -o FILE says (- for standard output)");
  if (o.bench && !o.otlp_endpoint.empty())
    throw UsageError("--otlp-endpoint sends a run's events: --bench keeps none (send a workload or command run)");
  if (!o.agree_with.empty() && !o.bench) throw UsageError("--agree-with goes with --bench");
  if (o.bench && (!o.command.empty() || workload_given))
    throw UsageError("--bench runs the per-call benchmark: it takes no --workload and no command");
  if (o.cost && o.bench) throw UsageError("--cost and --bench are two ways of measuring cost: give one");
  if (o.cost && !o.baseline)
    throw UsageError("--cost compares every method with none in the same round: --no-baseline does not apply");
  if (o.time_budget_s && !o.cost) throw UsageError("--time-budget bounds the rounds of --cost, which was not given");
  if (o.seed && !o.cost) throw UsageError("--seed draws the order of the runs of --cost, which was not given");
  if (o.cost && !o.reps_given) o.reps = 6;  // the fewest paired rounds that give a 95% interval
  if (!o.command.empty() && (workload_given || linkage_given))
    throw UsageError("--workload and --linkage do not apply when tracing a command after '--'");
  o.workloads = o.command.empty() ? name_list("workload", workload_arg, workload_names) : std::vector<std::string>{};
  o.methods = name_list("method", method_arg, method_names, method_groups, &o.methods_taken_out);
  o.method_arg = method_arg;
  // Every round pairs each method's run with none's: none is always there.
  if (o.cost && std::find(o.methods.begin(), o.methods.end(), "none") == o.methods.end())
    o.methods.insert(o.methods.begin(), "none");
  if (o.cost && o.methods.size() < 2) throw UsageError("--cost compares methods with none: name at least one other");
  if (linkage_arg == "both")
    o.linkages = {"static", "shared"};
  else if (linkage_arg == "static" || linkage_arg == "shared")
    o.linkages = {linkage_arg};
  else
    throw UsageError("unknown linkage '" + linkage_arg + "' (valid: static, shared, both)");
  return o;
}

namespace {

// --help in two halves: what the harness does and its run options, then the rest.
const char* help_runs() {
  return R"(usage: harness [options]
       harness [options] -- COMMAND [ARGS...]

Runs CUDA workloads under tracing methods and checks what each method saw against the
ground truth the workloads record themselves (the ledger): which calls it saw, with which
arguments and return codes, what it missed, and what it lost.

Every workload runs twice, once per cudart linkage (nvcc's default static cudart, and
shared), because several methods can only see one of them.

options:
  --workload NAME[,NAME]|all   workloads to run (default: all; repeated, the lists add up)
  --method NAME[,NAME]|GROUP   tracing methods (default: all; repeated, the lists add up).
                               Groups: all (every method --list shows), compared (the
                               methods a user compares: all but the cost references),
                               priced (compared, and the cost references that take a
                               method's cost apart in --bench: what the main job prices).
                               -NAME leaves a method (or group) out: compared,-nsys
  --linkage static|shared|both cudart linkage of the workload binaries (default: both)
  --reps N                     repetitions of each combination (default: 1)
  --out DIR                    results go to DIR/<run-id>/ (default: results)
  --timeout SECONDS            per child; a child that runs longer is killed and recorded
                               as timed out, and the matrix carries on (default: 600)
  --max-trace-bytes N          how much a method's raw output one run keeps and reads
                               (preload's records, the uprobe and cupti spools, strace's
                               text; K, M, G, T suffixes); default: half the free space
                               under --out when the run starts. What is past it is counted
                               as loss (over_bound_*) and the layer is never "complete"
  --stall-timeout SECONDS      end a run as failed ("stalled") once its processes used no CPU
                               and wrote no output for SECONDS (default: off, a program may
                               sleep): use it where a method may deadlock a program whose
                               threads then block (a thread spinning in a sync is progress)
  --set WORKLOAD.FLAG=VALUE    pass --FLAG=VALUE to one workload (repeatable; checked against
                               the workload's --help before anything runs), e.g.
                               --set burst.threads=16 --set vecadd.iters=1000
  --set METHOD.KEY=VALUE       a method's setting (--list shows them), e.g.
                               --set uprobe.ring_mb=16
  --bench                      per-call overhead instead of the workloads: single CUDA calls
                               (empty launch three ways, 4-byte async copy, 1 MiB malloc+free,
                               event record, idle stream sync, cudaGetDevice, and vecadd launch
                               + sync at 2^16 and 2^19 elements; with two GPUs, a peer copy and
                               an NCCL all-reduce, NCCL loaded at run time from
                               CUDATRACE_NCCL_LIB or libnccl.so.2) timed under each method;
                               --reps is the benchmark's repetitions (default 5).
                               Writes bench.json (Google Benchmark; compare.py works on it) and
                               bench_summary.json (median, delta to none with 95% interval)
  --agree-with RUN_FOLDER      with --bench: check this run against an earlier one (two runs
                               agree when >= 95% of this run's deltas lie in the earlier run's
                               95% interval or within max(10%, 100 ns) of its value); the
                               outcome goes into bench_summary.json and the report, not the
                               exit status
  --cost                       the slowdown each method causes, for the workloads or a command:
                               --reps N rounds (default 6), each running every program under
                               every method, round k starting at method k mod M, none (added
                               when not named) in every round. Per method: the median wall
                               time, the median of its ratios to none's run of the same
                               round, with an interval of those ratios' order statistics that
                               holds at least 95% (6 rounds or more; fewer: none, said so),
                               and start-up apart from the rest where a run tells it (the
                               ledger's first kernel launch; a command's mark, see below).
                               Every run is checked as in the matrix: one that failed, lost
                               events or left a layer unobserved is marked and counted, never
                               averaged in silently. Writes summary.json's "cost" too. A
                               command that exits 77 untraced says it cannot run here (its
                               last stderr line is the reason): it is skipped. A command may
                               write "<CLOCK_MONOTONIC ns> <what>" to the file named by
                               $CUDATRACE_STARTUP_MARK when its start-up is over, and one
                               such line per step end to $CUDATRACE_STEP_MARK: the slowdown
                               per step in steady state is then reported too. Each program
                               first runs once untraced, untimed (warm-up); each round's
                               order of methods is drawn from a seed (summary.json)
)";
}

const char* help_rest() {
  return R"(  --seed N                     with --cost: the seed of the runs' order (default: drawn)
  --time-budget SECONDS        with --cost: start no round that would end past SECONDS (judged
                               from the rounds done), and no run once SECONDS have passed;
                               the summary says where it stopped
  --export-trace RUN_FOLDER    write RUN_FOLDER/trace.json (Chrome/Perfetto: open it in
                               ui.perfetto.dev) from that run's events and ledger, then stop
  --export-jsonl RUN -o FILE   write a run folder's events (events.msgpack.zst, the store)
                               as JSON lines, one event a line (schema/event.v1.schema.json),
                               to FILE or - for standard output
  --export-otlp DIR [-o FILE]  write the events of every run in DIR (results/<run-id>, or one of
                               its runs/<combo>) as OpenTelemetry traces: OTLP JSON lines, one
                               TracesData per line, what the Collector's otlpjsonfile receiver
                               reads (default FILE: DIR/otlp.jsonl), then stop. A span per call,
                               kernel and device record; a resource per process and method,
                               with the method's loss counters and unobserved layers
  --otlp-endpoint URL          also send each run's spans, as it finishes, to an OTLP/HTTP
                               collector (e.g. http://localhost:4318; JSON, retried on 429/503);
                               with --export-otlp, send the exported file. A collector that
                               cannot be reached gets one line; results on disk are unaffected
  --list [--json]              list workloads and methods (kind, layers, settings), and
                               whether each can run here; --json: as one JSON object
  --no-report                  write no overhead.html into the run folder (a caller that
                               draws one report over several runs)
  --run-id-file FILE           write the path of this run's results folder to FILE (one
                               line), so that a script need not guess which folder is new
  -h, --help                   this text
  -- COMMAND [ARGS...]         trace any program instead of the workloads. There is no
                               ledger then: results give event counts per method and layer,
                               and how the methods agree with each other. The command also
                               runs untraced (method none, first) unless --method has it:
                               a traced run that ends otherwise than the untraced one (exit
                               status, signal) is a failed run, with both named
  --no-baseline                with a command, skip that untraced run (the runs' exits are
                               then not checked against it, and the summary says so)
  --result REGEX               what the program computed, from its stdout: the last line
                               REGEX matches (its first group, else the whole match), e.g.
                               --result 'final loss ([0-9.e+-]+)'. Each traced run's result
                               is compared with the untraced run's: a difference is named on
                               its line and in run.json (result_check)
  --strict-result              with --result: a traced run whose result differs (or that
                               printed none) fails

examples:
  harness --list
  harness --workload all --method none --linkage both --reps 3
  sudo harness --workload vecadd,errors --method compared
  harness --bench --method none,preload --linkage shared --reps 10
  harness --method none -- ./my_cuda_app --size 1024
  sudo harness --cost --reps 5 --method compared -- python3 train.py
  harness --export-otlp results/<run-id> -o run.otlp.jsonl
  sudo harness --workload vecadd --method cupti --otlp-endpoint http://localhost:4318

Methods that use eBPF need root (or CAP_BPF and CAP_PERFMON); under sudo the workloads
themselves run as the user who invoked sudo. Without a GPU, only what can run does (the
errors workload, host-side tracers), and everything skipped is listed with its reason.

bounds: what the traced program writes cannot exhaust the harness. Its files are read with
bounds per file and per run (--max-trace-bytes of strace output, of preload records and of
the eBPF spools, each read as a stream, never held whole), 32 MiB of
preload tables, 128 MiB of ledgers; devhook: 1 G device records streamed, 8 M blocks
kept), what lies past them counted as loss with its reason; the first 64 MiB of its stdout
and of its stderr are kept (the rest is freed as it comes and counted in run.json).
Harness memory: under 3 GiB whatever the program writes to the host-side methods' files
(preload, strace, ledgers), flat in the number of calls (a command at 10^8 calls: under
200 MiB; a workload's calls are paired from sorted files in its run folder); devhook
keeps at most 8 M blocks and 1 GiB of thread marks. Inline JSON from outside is refused
past 64 levels of nesting, and the console shows control characters from outside as \xHH.
Bytes that are not UTF-8 are written \xHH in the results (schema/README.md).

output: DIR/<run-id>/manifest.json (GPU, driver, CUDA, kernel, tools), runs/<combo>/
(stdout, stderr, events.msgpack.zst, run.json; target/ is the program's own folder: its
ledger.jsonl and the raw files of tracers inside it) and summary.json.

exit status: 0 all runs passed; 1 a run failed (crash, timeout, wrong result, bad
ledger, tracer error); 2 bad usage; 3 nothing requested could run here; 130 interrupted.
)";
}

}  // namespace

std::string help_text() { return std::string(help_runs()) + help_rest(); }

}  // namespace cudatrace
