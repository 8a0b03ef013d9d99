#include <gtest/gtest.h>

#include "harness/catalog.h"
#include "harness/cli.h"
#include "tracers/tracer.h"
#include "test_support.h"

using namespace cudatrace;

namespace {

const std::vector<std::string> kWorkloads{"vecadd", "streams", "errors"};
const std::vector<std::string> kMethods{"none", "preload", "strace"};

Options parse(std::vector<std::string> args) { return parse_cli(args, kWorkloads, kMethods); }

std::string usage_error(std::vector<std::string> args) {
  try {
    parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(Cli, DefaultsRunEverythingOnce) {
  Options o = parse({});
  EXPECT_EQ(o.workloads, kWorkloads);
  EXPECT_EQ(o.methods, kMethods);
  EXPECT_EQ(o.linkages, (std::vector<std::string>{"static", "shared"}));
  EXPECT_EQ(o.reps, 1);
  EXPECT_EQ(o.out, "results");
}

TEST(Cli, ListsAndAllExpand) {
  Options o = parse({"--workload", "errors,vecadd,errors", "--method=all", "--linkage", "shared", "--reps", "3"});
  EXPECT_EQ(o.workloads, (std::vector<std::string>{"errors", "vecadd"}));
  EXPECT_EQ(o.methods, kMethods);
  EXPECT_EQ(o.linkages, (std::vector<std::string>{"shared"}));
  EXPECT_EQ(o.reps, 3);
}

// A method's setting is kept for that method; whether the key is one it takes is checked
// against the registry by main (Method::options), not by the parser.
TEST(Cli, SetGoesToTheWorkloadOrTheMethodItNames) {
  Options o = parse({"--set", "vecadd.iters=5", "--set", "preload.depth=2"});
  EXPECT_EQ(o.workload_args["vecadd"], std::vector<std::string>{"--iters=5"});
  EXPECT_EQ(o.method_options["preload"]["depth"], "2");
  EXPECT_TRUE(o.workload_args.count("preload") == 0);
}

TEST(Cli, CommandAfterDoubleDash) {
  Options o = parse({"--method", "none", "--", "./app", "--size", "4"});
  EXPECT_EQ(o.command, (std::vector<std::string>{"./app", "--size", "4"}));
  EXPECT_TRUE(o.workloads.empty());
}

TEST(Cli, SetPassesFlagsToOneWorkload) {
  Options o = parse({"--set", "vecadd.iters=10", "--set=vecadd.n=64"});
  EXPECT_EQ(o.workload_args["vecadd"], (std::vector<std::string>{"--iters=10", "--n=64"}));
}

// Off unless asked for: a program that sleeps must not be ended for it.
TEST(Cli, StallTimeoutIsOffByDefaultAndBounded) {
  EXPECT_FALSE(parse({}).stall_timeout_s.has_value());
  EXPECT_EQ(parse({"--stall-timeout", "60"}).stall_timeout_s, 60.0);
  EXPECT_EQ(parse({"--stall-timeout=2.5"}).stall_timeout_s, 2.5);
  EXPECT_EQ(usage_error({"--stall-timeout", "0"}), "--stall-timeout wants a positive number, got '0'");
  EXPECT_EQ(usage_error({"--stall-timeout", "0.1"}),
            "--stall-timeout wants seconds from 0.5 to 604800 (7 days), got '0.1'");
  EXPECT_EQ(usage_error({"--stall-timeout"}), "--stall-timeout needs a value");
  EXPECT_NE(help_text().find("--stall-timeout SECONDS"), std::string::npos);
}

TEST(Cli, BadInputGetsOneClearLine) {
  EXPECT_EQ(usage_error({"--workload", "nope"}), "unknown workload 'nope' (valid: vecadd, streams, errors, all)");
  EXPECT_EQ(usage_error({"--method", "none,ebpf"}), "unknown method 'ebpf' (valid: none, preload, strace, all)");
  EXPECT_EQ(usage_error({"--linkage", "dynamic"}), "unknown linkage 'dynamic' (valid: static, shared, both)");
  EXPECT_EQ(usage_error({"--reps", "0"}), "--reps wants a whole number from 1 to 1000, got '0'");
  EXPECT_EQ(usage_error({"--reps", "2.5"}), "--reps wants a whole number from 1 to 1000, got '2.5'");
  EXPECT_EQ(usage_error({"--timeout", "soon"}), "--timeout wants a positive number, got 'soon'");
  EXPECT_EQ(usage_error({"--reps"}), "--reps needs a value");
  EXPECT_EQ(usage_error({"--frobnicate"}), "unknown option '--frobnicate'");
  EXPECT_EQ(usage_error({"--"}), "'--' must be followed by a command to trace");
  EXPECT_EQ(usage_error({"--workload", "vecadd", "--", "ls"}),
            "--workload and --linkage do not apply when tracing a command after '--'");
  EXPECT_NE(usage_error({"--set", "vecadd"}).find("--set wants WORKLOAD.FLAG=VALUE or METHOD.KEY=VALUE"),
            std::string::npos);
  EXPECT_EQ(usage_error({"--set", "gpu.x=1"}),
            "--set: 'gpu' is neither a workload (vecadd, streams, errors) nor a method (none, preload, strace)");
}

TEST(Cli, HelpTeachesWithExamples) {
  EXPECT_TRUE(parse({"--help"}).help);
  std::string h = help_text();
  for (const char* needle : {"--workload", "--method", "--linkage", "--reps", "--out", "--list", "examples:", "-- COMMAND", "exit status"})
    EXPECT_NE(h.find(needle), std::string::npos) << needle;
}

// The real binary: exit status and the one line a person sees.
TEST(Cli, HarnessBinaryRejectsBadInputWithExit2) {
  auto r = testsupport::run_command(std::string(HARNESS_PATH) + " --workload nope");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "harness: unknown workload 'nope' (valid: vecadd, streams, memheavy, errors, burst, graphs, driverapi, dlopen, privatert, multiproc, twogpu, twoproc, all) (see --help)\n");
  r = testsupport::run_command(std::string(HARNESS_PATH) + " --method none -- /no/such/program");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("cannot find '/no/such/program'"), std::string::npos) << r.output;
}

TEST(Cli, ListShowsEveryWorkloadAndMethodWithItsState) {
  auto r = testsupport::run_command(std::string(HARNESS_PATH) + " --list");
  EXPECT_EQ(r.exit_code, 0);
  std::vector<std::string> names;
  for (const auto& w : workloads()) names.push_back(w.name);
  for (const auto& m : methods()) names.push_back(m.name);
  for (const auto& name : names)
    EXPECT_NE(r.output.find("  " + name + " "), std::string::npos) << name << "\n" << r.output;
  EXPECT_NE(r.output.find("GPU: "), std::string::npos);
}

// A group's name (tracers' method_groups()) stands for its members, mixed with names.
TEST(Cli, MethodGroupsExpand) {
  const std::map<std::string, std::vector<std::string>> groups{{"compared", {"none", "strace"}}};
  Options o = parse_cli({"--method", "preload,compared"}, kWorkloads, kMethods, groups);
  EXPECT_EQ(o.methods, (std::vector<std::string>{"preload", "none", "strace"}));
  o = parse_cli({}, kWorkloads, kMethods, groups);
  EXPECT_EQ(o.methods, kMethods);
  try {
    parse_cli({"--method", "nope"}, kWorkloads, kMethods, groups);
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "unknown method 'nope' (valid: none, preload, strace, all, compared)");
  }
}

TEST(Cli, MethodsTakenOutOfAGroupAreKeptWithTheArgument) {
  const std::map<std::string, std::vector<std::string>> groups{{"compared", {"none", "preload", "strace"}}};
  Options o = parse_cli({"--method", "compared,-strace"}, kWorkloads, kMethods, groups);
  EXPECT_EQ(o.methods, (std::vector<std::string>{"none", "preload"}));
  EXPECT_EQ(o.methods_taken_out, (std::vector<std::string>{"strace"}));
  EXPECT_EQ(o.method_arg, "compared,-strace");
  // Taking out what was never in names nothing.
  o = parse_cli({"--method", "preload,-strace"}, kWorkloads, kMethods, groups);
  EXPECT_TRUE(o.methods_taken_out.empty());
}

TEST(Cli, ListJsonAndRunIdFile) {
  Options o = parse({"--list", "--json"});
  EXPECT_TRUE(o.list && o.json);
  EXPECT_EQ(usage_error({"--json"}), "--json goes with --list");
  EXPECT_EQ(parse({"--run-id-file", "/tmp/x"}).run_id_file, "/tmp/x");
  EXPECT_EQ(usage_error({"--run-id-file="}), "--run-id-file needs a file name");
}
