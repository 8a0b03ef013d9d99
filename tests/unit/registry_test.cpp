#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "harness/plan.h"
#include "test_support.h"
#include "tracers/tracer.h"

using namespace cudatrace;
namespace fs = std::filesystem;

// The registry is the only list of methods: this test holds each entry to the layout rule
// (docs/ADDING_A_METHOD.md) instead of keeping a list of names of its own.
TEST(Registry, EveryMethodOnceFromItsOwnFolder) {
  std::set<std::string> names;
  for (const auto& m : methods()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name << " listed twice";
    EXPECT_FALSE(m.summary.empty()) << m.name;
    // A variant (uprobe-enter, devhook-thread) lives in its method's folder.
    const std::string folder = m.name.substr(0, m.name.find('-'));
    const std::filesystem::path dir = std::filesystem::path(CUDATRACE_SOURCE_DIR) / "tracers" / folder;
    EXPECT_TRUE(std::filesystem::exists(dir / (folder + "_method.cpp"))) << m.name << ": no " << dir << "/"
                                                                       << folder << "_method.cpp";
    EXPECT_TRUE(std::filesystem::exists(dir / "README.md")) << m.name << ": no card in " << dir;
  }
  EXPECT_GE(names.size(), 2u);
  EXPECT_TRUE(names.count("none"));
  EXPECT_EQ(find_method("nope"), nullptr);
}

// A method exists to observe something, and says what: the harness reports every layer of
// it that a run did not see. Only references and cost references may observe nothing.
TEST(Registry, KindsAndLayers) {
  for (const auto& m : methods()) {
    const std::string kind = kind_name(m.kind);
    EXPECT_TRUE(kind == "method" || kind == "cost reference" || kind == "reference" || kind == "placeholder") << kind;
    if (m.kind == MethodKind::kMethod) EXPECT_FALSE(m.layers.empty()) << m.name << " names no layer it observes";
    // What it cannot see of each layer, said where a run sees less than all of it.
    for (const auto& l : m.layers) {
      auto it = m.limits.find(l);
      EXPECT_TRUE(it != m.limits.end() && !it->second.empty()) << m.name << " names no limit for its " << l << " layer";
    }
    for (const auto& [l, why] : m.limits)
      EXPECT_NE(std::find(m.layers.begin(), m.layers.end(), l), m.layers.end()) << m.name << ": a limit for " << l;
  }
  EXPECT_EQ(find_method("none")->kind, MethodKind::kReference);
  EXPECT_TRUE(find_method("none")->layers.empty());
}

// Which GPU its records are on: every layer a method observes says whether its records name
// the device and how, or why they cannot (the verdict gives that reason, never a lump).
TEST(Registry, EveryLayerSaysWhetherItsRecordsNameTheirDevice) {
  for (const auto& m : methods()) {
    for (const auto& l : m.layers) {
      auto it = m.devices.find(l);
      ASSERT_TRUE(it != m.devices.end()) << m.name << " says nothing of the device of its " << l << " records";
      EXPECT_FALSE(it->second.how.empty()) << m.name << ": " << l;
    }
    for (const auto& [l, d] : m.devices)
      EXPECT_NE(std::find(m.layers.begin(), m.layers.end(), l), m.layers.end()) << m.name << ": devices for " << l;
  }
  EXPECT_FALSE(find_method("strace")->devices.at("syscall").named);
  EXPECT_FALSE(find_method("uprobe")->devices.at("runtime").named);
  EXPECT_TRUE(find_method("cupti")->devices.at("gpu-activity").named);
}

// `--method compared` is what the scripts run instead of a list of names: every method
// but the cost references, in the registry's order; `all` is every one.
// A method's cost split (where the benchmark takes its cost apart) names only cost references
// of the registry, and names its parts; at least one method has one, or the table is empty.
TEST(Registry, CostSplitsNameCostReferencesOfTheRegistry) {
  int splits = 0;
  for (const auto& m : methods()) {
    if (!m.cost_split) continue;
    ++splits;
    const CostSplit& c = *m.cost_split;
    EXPECT_EQ(m.kind, MethodKind::kMethod) << m.name;
    EXPECT_FALSE(c.paused.name.empty() || c.live.name.empty() || c.floor_what.empty()) << m.name;
    std::vector<std::string> refs;
    for (const auto& p : c.nested) refs.push_back(p.reference);
    if (!c.floor_reference.empty()) refs.push_back(c.floor_reference);
    for (const auto& r : refs) {
      const Method* ref = find_method(r);
      ASSERT_NE(ref, nullptr) << m.name << " names " << r;
      EXPECT_EQ(ref->kind, MethodKind::kCostReference) << m.name << " names " << r;
    }
    for (const auto& p : c.nested) EXPECT_FALSE(p.name.empty() || p.what.empty()) << m.name;
  }
  EXPECT_GE(splits, 1);
}

TEST(Registry, GroupsComeFromKinds) {
  const auto& groups = method_groups();
  ASSERT_TRUE(groups.count("all"));
  ASSERT_TRUE(groups.count("compared"));
  std::vector<std::string> all, compared;
  for (const auto& m : methods()) {
    all.push_back(m.name);
    if (m.kind != MethodKind::kCostReference) compared.push_back(m.name);
  }
  EXPECT_EQ(groups.at("all"), all);
  EXPECT_EQ(groups.at("compared"), compared);
  EXPECT_LT(compared.size(), all.size());
  // priced: compared and the references some cost split nests or some method is held
  // against, and no other.
  ASSERT_TRUE(groups.count("priced"));
  std::set<std::string> nested;
  for (const auto& m : methods()) {
    if (m.cost_split)
      for (const auto& p : m.cost_split->nested) nested.insert(p.reference);
    for (const auto& bar : m.cost_bars) nested.insert(bar.against.begin(), bar.against.end());
  }
  EXPECT_FALSE(nested.empty());
  EXPECT_TRUE(nested.count("nsys-all")) << "cupti is held against Nsight Systems recording every API";
  for (const auto& name : nested) EXPECT_NE(find_method(name), nullptr) << name << " is named but not registered";
  for (const auto& m : methods()) {
    const auto& priced = groups.at("priced");
    const bool in = std::find(priced.begin(), priced.end(), m.name) != priced.end();
    EXPECT_EQ(in, m.kind != MethodKind::kCostReference || nested.count(m.name) > 0) << m.name;
  }
  for (const auto& g : groups) EXPECT_EQ(find_method(g.first), nullptr) << g.first << " is a group and a method";
}

// Nsight Systems is the reference users already have: where it is missing, the reason
// says where it was looked for and where to get it.
TEST(Registry, NsysUnavailableSaysWhy) {
  const Method* nsys = find_method("nsys");
  ASSERT_NE(nsys, nullptr);
  if (!nsys->built) GTEST_SKIP() << "nsys method not built here: " << nsys->not_built_reason;
  const char* old = std::getenv("NSYS");
  const std::string saved = old ? old : "";
  setenv("NSYS", "/nonexistent/nsys", 1);
  const Availability a = availability(*nsys, HostFacts{.root = true, .gpu = true});
  if (old)
    setenv("NSYS", saved.c_str(), 1);
  else
    unsetenv("NSYS");
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.reason, "NSYS=/nonexistent/nsys is not an executable file");
  EXPECT_EQ(availability(*nsys, HostFacts{.root = true, .gpu = false}).reason.rfind("needs a GPU", 0), 0u);
}

TEST(Registry, UnbuiltMethodsSaySoAndHaveNoFactory) {
  HostFacts everything{.root = true, .gpu = true};
  for (const auto& m : methods()) {
    Availability a = availability(m, everything);
    if (m.built) {
      EXPECT_TRUE(m.make) << m.name;
      continue;
    }
    EXPECT_FALSE(a.ok) << m.name;
    if (m.not_built_reason.empty())
      EXPECT_EQ(a.reason, "not built yet (issue #" + std::to_string(m.issue) + ")");
    else
      EXPECT_EQ(a.reason, "not built: " + m.not_built_reason);
    EXPECT_FALSE(m.make) << m.name << " must not be runnable while unbuilt";
  }
}

// Every missing prerequisite is named at once, privilege first, so that a user installs
// what is missing in one go rather than one reason per try.
TEST(Registry, MissingPrivilegeGpuOrToolIsAReason) {
  Method m{.name = "x", .built = true, .needs_root = true, .needs_gpu = true, .tools = {"no-such-tool-xyz"},
           .tool_packages = {{"no-such-tool-xyz", "xyz-pkg"}}};
  m.unavailable_with = [](const MethodOptions& o) { return o.count("broken") ? std::string("the library is broken") : ""; };
  HostFacts bare{.root = false, .gpu = false, .gpu_reason = "no NVIDIA driver"};
  const std::string root = "needs root or CAP_BPF+CAP_PERFMON (run the harness with sudo)";
  const std::string gpu = "needs a GPU: no NVIDIA driver";
  const std::string tool = "no-such-tool-xyz not found on PATH (apt-get install xyz-pkg)";
  EXPECT_EQ(availability(m, bare).reason, root + "; and " + gpu + "; and " + tool);
  EXPECT_EQ(availability(m, bare, {{"broken", "1"}}).reason,
            root + "; and " + gpu + "; and " + tool + "; and the library is broken");
  bare.root = true;
  EXPECT_EQ(availability(m, bare).reason, gpu + "; and " + tool);
  bare.gpu = true;
  EXPECT_EQ(availability(m, bare).reason, tool);
  m.tools = {"no-such-tool-xyz", "sh", "no-such-tool-abc"};  // every missing tool, not only the first
  EXPECT_EQ(availability(m, bare).reason, tool + "; and no-such-tool-abc not found on PATH");
  m.tools = {"sh"};
  EXPECT_TRUE(availability(m, bare).ok);
  EXPECT_FALSE(availability(m, bare, {{"broken", "1"}}).ok);
}

// bpftime has no package: without it the method is listed with where to get it.
TEST(Registry, BpftimeNotInstalledSaysWhereToGetIt) {
  const Method* m = find_method("bpftime");
  ASSERT_NE(m, nullptr);
  HostFacts everything{.root = true, .gpu = true};
  setenv("BPFTIME_ROOT", "/nonexistent-bpftime", 1);
  const Availability a = availability(*m, everything);
  unsetenv("BPFTIME_ROOT");
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.reason.find("bpftime is not installed"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("github.com/eunomia-bpf/bpftime"), std::string::npos) << a.reason;
}

// What scripts read instead of a list of their own: `harness --list --json` is the registry.
TEST(Registry, ListJsonIsTheRegistry) {
  const auto r = testsupport::run_command("(" + std::string(HARNESS_PATH) + " --list --json 2>/dev/null)");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto list = nlohmann::json::parse(r.output);
  std::vector<std::string> listed;
  for (const auto& m : list.at("methods")) {
    listed.push_back(m.at("name"));
    const Method* known = find_method(listed.back());
    ASSERT_NE(known, nullptr);
    EXPECT_EQ(m.at("kind"), kind_name(known->kind));
    EXPECT_EQ(m.at("layers"), known->layers);
    if (!known->built) EXPECT_EQ(m.at("not_built_reason"), known->not_built_reason);
  }
  EXPECT_EQ(listed, method_groups().at("all"));
  EXPECT_EQ(list.at("method_groups").at("compared"), method_groups().at("compared"));
}

// A profiler of one Python framework has nothing to trace in the C++ workloads: their
// combinations are skipped with the method's reason, not run to observe nothing, while a
// command still runs under it.
TEST(Registry, FrameworkProfilersSkipTheWorkloadsWithTheirReason) {
  const fs::path dir = testsupport::temp_dir("framework-python");
  const fs::path python = dir / "python-with-both";
  {
    std::ofstream(python) << "#!/bin/sh\necho /site-packages/torch/__init__.py /site-packages/jax/__init__.py\n";
  }
  fs::permissions(python, fs::perms::owner_all);
  HostFacts host;
  host.gpu = true;
  Options opts;
  opts.workloads = {"vecadd"};
  opts.linkages = {"shared"};
  opts.methods = {"torchprof", "jaxprof"};
  for (const auto& m : opts.methods) opts.method_options[m] = {{"python", python.string()}};
  MatrixPlan plan = plan_matrix(opts, host);
  EXPECT_TRUE(plan.todo.empty());
  ASSERT_EQ(plan.skipped.size(), 2u) << plan.skipped.dump();
  for (const auto& s : plan.skipped)
    EXPECT_NE(s["reason"].get<std::string>().find("the workloads are C++ programs"), std::string::npos) << s.dump();
  opts.workloads.clear();
  opts.command = {"python3", "train.py"};
  opts.baseline = false;
  plan = plan_matrix(opts, host);
  EXPECT_EQ(plan.todo.size(), 2u) << "a command runs under them: " << plan.skipped.dump();
}
