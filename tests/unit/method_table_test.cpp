// The end-of-run table (harness/out/summary.h): one row per method from a recorded matrix's
// summary.json, the untraced baseline left out, and short enough to read on one screen.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "harness/out/summary.h"
#include "tracers/tracer.h"

using json = nlohmann::json;

TEST(MethodTable, OneRowPerMethodFromARecordedMatrix) {
  std::ifstream f(std::string(CUDATRACE_FIXTURES) + "/results-h100/matrix/summary.json");
  ASSERT_TRUE(f) << "fixture missing";
  const json summary = json::parse(f);
  const std::string table = cudatrace::method_table(summary);
  std::vector<std::string> lines;
  std::istringstream in(table);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  // A header, one row for each of the five methods the matrix ran, the legend.
  ASSERT_EQ(lines.size(), 7u) << table;
  EXPECT_NE(lines[0].find("method"), std::string::npos) << table;
  EXPECT_NE(lines[0].find("workloads"), std::string::npos) << table;
  EXPECT_NE(lines[0].find("lost events"), std::string::npos) << table;
  std::vector<std::string> methods;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    std::istringstream w(lines[i]);
    std::string m;
    w >> m;
    methods.push_back(m);
    EXPECT_LE(lines[i].size(), 160u) << lines[i];
  }
  // The recorded combinations' methods, the untraced baseline left out, in the order they ran.
  std::vector<std::string> ran;
  for (const auto& c : summary["combos"])
    if (const std::string m = c["method"]; m != "none" && std::find(ran.begin(), ran.end(), m) == ran.end()) ran.push_back(m);
  EXPECT_EQ(methods, ran) << table;
  EXPECT_EQ(cudatrace::method_table(json{{"combos", json::array()}}), "") << "no method, no table";
}

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

const json* method_entry(const json& methods, const std::string& name) {
  for (const auto& m : methods)
    if (m["method"] == name) return &m;
  return nullptr;
}

// The methods `--method all` names besides none (the registry's: a new method joins the
// test), each with a long reason somewhere: every method has a line to say, more than the
// end of the run has room for.
std::vector<std::string> all_but_none() {
  std::vector<std::string> out;
  for (const auto& m : cudatrace::methods())
    if (m.name != "none") out.push_back(m.name);
  return out;
}
const std::vector<std::string> kMethods = all_but_none();
const std::string kLongReason =
    "cudart is linked statically into /opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so; "
    "the shim sees only calls made through the shared libcudart.so.13 and none of the library's own";

json layer(const std::string& name, int64_t expected, int64_t matched) {
  return {{"layer", name}, {"expected", expected}, {"matched", matched}};
}

// A matrix of 8 workloads x 2 linkages x (none + every other method), run with --cost: what a
// typical `harness --workload all --method all --cost` leaves in summary.json.
json many_workloads_summary() {
  const std::vector<std::string> workloads = {"vecadd", "streams", "memheavy", "errors", "burst", "graphs", "driverapi", "dlopen"};
  json combos = json::array(), programs = json::array();
  for (const auto& w : workloads)
    for (const std::string linkage : {"shared", "static"}) {
      json cost_methods = json::array({{{"method", "none"}, {"ratio", nullptr}, {"marks", json::array()}}});
      combos.push_back({{"workload", w}, {"linkage", linkage}, {"method", "none"}, {"ok", 3}, {"reps", 3}, {"failed", 0},
                        {"layers", json::array()}, {"loss", json::object()}});
      for (size_t i = 0; i < kMethods.size(); ++i) {
        json c = {{"workload", w}, {"linkage", linkage}, {"method", kMethods[i]}, {"ok", 3}, {"reps", 3}, {"failed", 0},
                  {"failures", json::array()}, {"layers", json::array({layer("runtime", 100, 100)})}, {"loss", json::object()}};
        if (kMethods[i] == "preload" && linkage == "static") {
          c["layers"] = json::array({layer("runtime", 100, 0)});
          c["unobserved"] = json::array({{{"layer", "runtime"}, {"reason", kLongReason}}});
        }
        if (kMethods[i] == "uprobe" && w == "burst") c["loss"] = {{"ring_full", 5000}, {"truncated", true}};
        if (kMethods[i] == "uprobe-empty") c["layers"] = json::array();
        if (kMethods[i] == "devhook" && w == "errors") c["ok"] = 0, c["failures"] = json::array({kLongReason});
        if (i > 3 && kMethods[i] != "devhook") c["partly_observed"] = json::array({{{"layer", "runtime"}, {"reason", kLongReason}}});
        combos.push_back(c);
        cost_methods.push_back({{"method", kMethods[i]},
                                {"ratio", {{"value", 1.0 + 0.1 * double(i)}, {"pairs", 6}, {"ci95", {1.0, 2.0}}}},
                                {"marks", json::array()}});
      }
      programs.push_back({{"program", w + "." + linkage}, {"workload", w}, {"linkage", linkage},
                          {"methods", cost_methods}, {"not_run", json::array()}});
    }
  json skipped = json::array({{{"workload", "twogpu"}, {"linkage", "shared"}, {"method", "nsys"}, {"reason", "needs two GPUs"}}});
  return {{"run_id", "many"}, {"combos", combos}, {"skipped", skipped},
          {"counts", {{"runs", 3 * combos.size()}, {"ok", 3 * combos.size()}, {"failed", 0}, {"skipped_combinations", 1},
                      {"layers_not_observed", 8}, {"results_changed", 0}}},
          {"cost", {{"programs", programs}}}};
}

// `harness --method all -- python3 prog.py`: one command, three layers per method, one
// method skipped, one short on a process.
json command_summary() {
  json combos = json::array(), coverage = json::array(), skipped = json::array();
  combos.push_back({{"workload", nullptr}, {"linkage", nullptr}, {"method", "none"}, {"ok", 3}, {"reps", 3}, {"layers", json::array()}});
  for (size_t i = 0; i < kMethods.size(); ++i) {
    if (kMethods[i] == "nsys") {
      skipped.push_back({{"workload", nullptr}, {"linkage", nullptr}, {"method", "nsys"}, {"reason", "nsys is not installed"}});
      continue;
    }
    combos.push_back({{"workload", nullptr}, {"linkage", nullptr}, {"method", kMethods[i]}, {"ok", 3}, {"reps", 3},
                      {"layers", json::array()}, {"loss", json::object()}});
    for (const std::string l : {"runtime", "driver", "gpu-activity"}) {
      json row = {{"method", kMethods[i]}, {"layer", l}, {"status", "complete"}, {"coverage", 1.0}};
      if (i > 0 && kMethods[i] != "cupti" && l == "gpu-activity")
        row = {{"method", kMethods[i]}, {"layer", l}, {"status", "partial"}, {"coverage", 0.95}, {"why", kLongReason}};
      if (kMethods[i] == "uprobe" && l == "driver") row = {{"method", "uprobe"}, {"layer", l}, {"status", "partial"}, {"coverage", 0.9321}, {"why", kLongReason}};
      if (kMethods[i] == "devhook" && l == "runtime") row = {{"method", "devhook"}, {"layer", l}, {"status", "not observed"}, {"coverage", nullptr}, {"reason", kLongReason}};
      coverage.push_back(row);
    }
  }
  json verdict = {{"reference", json::object()}, {"coverage", coverage},
                  {"per_device", {{"short", {{"cupti", {{"driver", json::array({"rank 1 on GPU 1: 0 of 40 (0.0%)"})}}}}}}}};
  return {{"run_id", "cmd"}, {"combos", combos}, {"skipped", skipped}, {"verdict", verdict},
          {"command_line", json::array({"harness", "--method", "all", "--", "python3", "prog.py"})},
          {"counts", {{"runs", 36}, {"ok", 36}, {"failed", 0}, {"skipped_combinations", 1}}}};
}

}  // namespace

TEST(MethodTable, SummaryJsonHoldsOneVerdictPerMethodAsTheTableShowsIt) {
  json summary = many_workloads_summary();
  const json methods = cudatrace::methods_json(summary);
  ASSERT_EQ(methods.size(), kMethods.size()) << "every method but none, once";
  EXPECT_EQ(method_entry(methods, "none"), nullptr);
  const json& preload = *method_entry(methods, "preload");
  EXPECT_EQ(preload["workloads"]["status"], "not observed") << preload.dump(1);
  EXPECT_EQ(preload["workloads"]["programs"].size(), 16u);
  EXPECT_EQ(preload["workloads"]["counts"]["complete"], 8);
  EXPECT_EQ(preload["workloads"]["counts"]["not observed"], 8);
  EXPECT_EQ(preload["workloads"]["reason_programs"].size(), 8u);
  EXPECT_EQ(preload["workloads"]["reason"], "runtime not observed: " + kLongReason + "; runtime 0.0% of the ledger");
  EXPECT_TRUE(preload["command"].is_null()) << "no command ran";
  const json& uprobe = *method_entry(methods, "uprobe");
  EXPECT_EQ(uprobe["workloads"]["status"], "partial");
  EXPECT_EQ(uprobe["lost"]["events"], 10000) << "ring_full on burst.shared and burst.static; a flag is no count";
  EXPECT_EQ(uprobe["lost"]["combinations"], 2);
  EXPECT_EQ(uprobe["lost"]["of"], 16);
  EXPECT_EQ(method_entry(methods, "devhook")->at("workloads")["status"], "failed");
  EXPECT_EQ(method_entry(methods, "uprobe-empty")->at("workloads")["status"], "nothing to see") << "observes no layer";
  EXPECT_EQ(method_entry(methods, "strace")->at("workloads")["status"], "partial") << "partly observed";
  EXPECT_EQ(method_entry(methods, "nsys")->at("workloads")["not_run"], 1);
  EXPECT_EQ(method_entry(methods, "cupti")->at("slowdown").size(), 16u);

  const json command = cudatrace::methods_json(command_summary());
  ASSERT_EQ(command.size(), kMethods.size()) << "the skipped method too";
  EXPECT_EQ(method_entry(command, "nsys")->at("command")["status"], "not run");
  EXPECT_EQ(method_entry(command, "nsys")->at("command")["reason"], "nsys is not installed");
  const json& up = method_entry(command, "uprobe")->at("command");
  EXPECT_EQ(up["status"], "partial");
  EXPECT_EQ(up["layer"], "driver");
  EXPECT_DOUBLE_EQ(up["coverage"].get<double>(), 0.9321);
  EXPECT_EQ(method_entry(command, "devhook")->at("command")["status"], "not observed");
  const json& cupti = method_entry(command, "cupti")->at("command");
  EXPECT_EQ(cupti["status"], "partial") << "complete in total, a process short: " << cupti.dump();
  EXPECT_TRUE(cupti["short"].get<bool>());
  EXPECT_EQ(method_entry(command, "preload")->at("command")["status"], "complete");

  // The table is drawn from the field: what it says there is what the console says.
  summary["methods"] = methods;
  summary["methods"][0]["workloads"]["status"] = "blind";
  EXPECT_NE(cudatrace::method_table(summary).find("blind (8/16 complete)"), std::string::npos) << cudatrace::method_table(summary);
  // What a method lost in other units than events is said beside the events, in its units.
  for (auto& m : summary["methods"])
    if (m["method"] == "uprobe") m["lost"]["other"] = {{"files", 3}};
  EXPECT_NE(cudatrace::method_table(summary).find("10000, 3 files in 2 of 16"), std::string::npos)
      << cudatrace::method_table(summary);
}

// "SHORT" says a process (or GPU) fell shorter than its layer's total, which the total hides.
// Where each process is as short as the layer (DDP's two ranks under preload, 56.7% of a
// 56.7% layer, printed "partial 56.7% runtime SHORT"), the share says it already.
TEST(MethodTable, ShortOnlyWhereAProcessFellShorterThanItsLayer) {
  json summary = command_summary();
  json& verdict = summary["verdict"];
  const auto process_row = [](const char* process, double coverage) {
    return json{{"method", "uprobe"}, {"layer", "driver"}, {"process", process},
                {"device", "device not attributable by this method"}, {"coverage", coverage}};
  };
  verdict["per_device"]["short"]["uprobe"] = {{"driver", json::array({"process 1: 93 of 100 (93.0%)"})}};
  verdict["per_device"]["rows"] = json::array({process_row("process 1", 0.9321), process_row("process 2", 0.9321)});
  const json alike = method_entry(cudatrace::methods_json(summary), "uprobe")->at("command");
  EXPECT_FALSE(alike["short"].get<bool>()) << alike.dump();
  EXPECT_EQ(alike["status"], "partial");

  verdict["per_device"]["rows"][1]["coverage"] = 0.5;  // one rank far shorter than the layer
  const json uneven = method_entry(cudatrace::methods_json(summary), "uprobe")->at("command");
  EXPECT_TRUE(uneven["short"].get<bool>()) << uneven.dump();
}

TEST(MethodTable, TheEndOfAManyWorkloadManyMethodRunFitsIn30Lines) {
  for (json summary : {many_workloads_summary(), command_summary()}) {
    summary["methods"] = cudatrace::methods_json(summary);
    const std::string text = cudatrace::end_of_run_text(summary, "/results/x", cudatrace::kEndOfRunLines);
    const std::vector<std::string> lines = lines_of(text);
    SCOPED_TRACE(text);
    EXPECT_LE(lines.size(), cudatrace::kEndOfRunLines);
    EXPECT_LE(cudatrace::kEndOfRunLines, 30u - 4u) << "room for the report's line, OTLP's and the exit's";
    // Every method has its row, and the reasons that did not fit are said to be elsewhere.
    for (const auto& m : kMethods) {
      bool row = false;
      for (const auto& l : lines) row = row || l.rfind("  " + m + " ", 0) == 0;
      EXPECT_TRUE(row) << m;
    }
    EXPECT_NE(text.find("more method(s) with a reason (summary.json methods[])"), std::string::npos);
    EXPECT_NE(lines.back().find("/results/x/summary.json"), std::string::npos) << "the last line says where the rest is";
    EXPECT_NE(lines[lines.size() - 2].find("run(s) ok"), std::string::npos);
    for (const auto& l : lines) EXPECT_LE(l.size(), 200u) << l;
  }
}
