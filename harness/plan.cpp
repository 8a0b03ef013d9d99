#include "harness/plan.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "harness/catalog.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json skip_entry(const Combo& c, const std::string& reason) {
  return {{"workload", c.workload.empty() ? json(nullptr) : json(c.workload)},
          {"linkage", c.linkage.empty() ? json(nullptr) : json(c.linkage)},
          {"method", c.method},
          {"reason", reason}};
}

MatrixPlan plan_matrix(const Options& opts, const HostFacts& host) {
  MatrixPlan plan;
  std::vector<Combo> combos;
  // The untraced run of each program first: every traced run's ending is checked against it.
  std::vector<std::string> methods_in_order = opts.methods;
  if (!opts.command.empty() && opts.baseline &&
      std::find(methods_in_order.begin(), methods_in_order.end(), "none") == methods_in_order.end()) {
    methods_in_order.insert(methods_in_order.begin(), "none");
    plan.added_baseline = true;
    std::fprintf(stderr, "harness: the command runs untraced first (method none), to check every traced run's "
                         "exit against it (--no-baseline skips it)\n");
  }
  std::stable_partition(methods_in_order.begin(), methods_in_order.end(), [](const std::string& m) { return m == "none"; });
  if (opts.command.empty()) {
    for (const auto& w : opts.workloads)
      for (const auto& l : opts.linkages) {
        const auto& builds = find_workload(w)->linkages;
        if (std::find(builds.begin(), builds.end(), l) == builds.end()) continue;  // dlopen has no static build
        for (const auto& m : methods_in_order) combos.push_back({w, l, m});
      }
  } else {
    for (const auto& m : methods_in_order) combos.push_back({"", "", m});
  }
  for (const auto& c : combos) {
    std::string reason;
    const auto options = opts.method_options.find(c.method);
    const Availability a = availability(*find_method(c.method), host,
                                        options == opts.method_options.end() ? MethodOptions{} : options->second);
    if (!a.ok) {
      reason = "method " + c.method + ": " + a.reason;
    } else if (!c.workload.empty() && !find_method(c.method)->not_for_workloads.empty()) {
      reason = "method " + c.method + ": " + find_method(c.method)->not_for_workloads;
    } else if (!c.workload.empty()) {
      reason = workload_unavailable(*find_workload(c.workload), host);
      if (reason.empty() && !fs::exists(workload_binary(host.prefix, c.workload, c.linkage)))
        reason = "workload binary missing: " + workload_binary(host.prefix, c.workload, c.linkage).string();
    }
    if (reason.empty()) plan.todo.push_back(c);
    else plan.skipped.push_back(skip_entry(c, reason));
  }
  return plan;
}

}  // namespace cudatrace
