// The per-(process, device) bookkeeping behind the verdicts (harness/score/per_device.h): device
// identities, process names, the matcher's buckets, and a command's processes matched to
// the reference's. All on hand-made events: no GPU.
#include <gtest/gtest.h>

#include "common/device_id.h"
#include "harness/score/matcher.h"
#include "harness/score/per_device.h"
#include "harness/score/verdict.h"

using namespace cudatrace;
using nlohmann::json;

namespace {

constexpr const char* kBus0 = "0000:18:00.0";
constexpr const char* kBus1 = "0000:1a:00.0";

Event call(const std::string& name, int64_t pid, int64_t tid, int64_t ts, std::optional<int64_t> device = std::nullopt,
           std::string device_id = "", json args = json::object()) {
  Event e;
  e.layer = layer::kRuntime;
  e.name = name;
  e.pid = pid;
  e.tid = tid;
  e.ts = ts;
  e.dur = 100;
  e.ret = 0;
  e.device = device;
  e.device_id = std::move(device_id);
  e.args = std::move(args);
  return e;
}

Event launch(int64_t pid, int64_t tid, int64_t ts, int64_t device, const std::string& kernel) {
  Event e = call("cudaLaunchKernel", pid, tid, ts, device, "", {{"kernel", kernel}, {"grid", {4, 1, 1}}});
  e.ret.reset();
  return e;
}

Event kernel(int64_t pid, int64_t ts, std::optional<int64_t> device, const std::string& name, std::string id = "") {
  Event e;
  e.layer = layer::kGpuActivity;
  e.name = name;
  e.pid = pid;
  e.ts = ts;
  e.device = device;
  e.device_id = std::move(id);
  e.args = {{"kernel", name}, {"grid", {4, 1, 1}}};
  return e;
}

Event ledger_header(int64_t pid, const std::string& process) {
  Event h;
  h.layer = layer::kMeta;
  h.name = "ledger";
  h.pid = pid;
  h.ts = 1;
  h.args = {{"info", process.empty() ? json::object() : json{{"process", process}}}};
  return h;
}

std::map<int, HostDevice> two_gpus() {
  return {{0, {0, kBus0, "GPU-aaaaaaaa-0000-0000-0000-000000000000", "H100"}},
          {1, {1, kBus1, "GPU-bbbbbbbb-0000-0000-0000-000000000000", "H100"}}};
}

const json* bucket(const json& per_device, const std::string& process, const std::string& device) {
  for (const auto& b : per_device)
    if (b["process"] == process && b["device"] == device) return &b;
  return nullptr;
}

}  // namespace

TEST(DeviceId, BusIdsInEveryMethodsSpellingAreOne) {
  EXPECT_EQ(normalize_pci_bus_id("0000:18:00.0"), "0000:18:00.0");
  EXPECT_EQ(normalize_pci_bus_id("00000000:1A:00.0"), "0000:1a:00.0") << "nvidia-smi's eight-digit domain";
  EXPECT_EQ(normalize_pci_bus_id("0:1a:0.0"), "0000:1a:00.0");
  for (const char* bad : {"", "GPU-1234", "0000:18:00", "0000:18:00.8", "0000:18:00.0 ", "0000:118:00.0",
                          "10000:18:00.0", "0000:18:20.0", "x000:18:00.0"})
    EXPECT_EQ(normalize_pci_bus_id(bad), "") << bad;
  const auto host = two_gpus();
  EXPECT_EQ(bus_id_of_uuid(host, "GPU-bbbbbbbb-0000-0000-0000-000000000000"), kBus1);
  EXPECT_EQ(bus_id_of_uuid(host, "BBBBBBBB000000000000000000000000"), kBus1) << "bare hex, any case";
  EXPECT_EQ(bus_id_of_uuid(host, "GPU-cccccccc-0000-0000-0000-000000000000"), "");
}

// Two processes' device 0 are two GPUs when their bus ids say so; an ordinal alone is
// named as such, or by the host's table when the process inherited the harness's numbering.
TEST(DeviceNames, OrdinalsAreNamedByTheBusIdTheProcessGaveThemElseTheHostsElseAsOrdinals) {
  const auto host = two_gpus();
  DeviceNames names(&host);
  names.learn(call("cudaSetDevice", 10, 10, 1, 0, "00000000:1A:00.0"));  // process 10 sees only GPU 1, as its device 0
  EXPECT_EQ(names.key(call("cudaMalloc", 10, 10, 2, 0)), kBus1) << "learnt from another record of the process";
  EXPECT_EQ(names.key(call("cudaMalloc", 20, 20, 2, 0)), kBus0) << "the host's ordinal 0";
  EXPECT_EQ(names.inferred_from_host().count({20, 0}), 1u);
  EXPECT_EQ(names.key(call("cudaMalloc", 20, 20, 2, 7)), "device 7") << "no bus id anywhere";
  EXPECT_EQ(names.key(call("cudaGetDeviceCount", 20, 20, 2)), kNoDevice);
  DeviceNames bare;
  EXPECT_EQ(bare.key(call("cudaMalloc", 20, 20, 2, 1)), "device 1");
}

TEST(ProcessLabels, TheWorkloadsNameElseTheOrderOfFirstCalls) {
  const std::vector<Event> meta = {ledger_header(30, "rank 1"), ledger_header(20, "rank 0"), ledger_header(40, ""),
                                   ledger_header(50, "twin"), ledger_header(60, "twin")};
  const std::vector<Event> calls = {call("cudaMalloc", 40, 40, 500), call("cudaMalloc", 30, 30, 100),
                                    call("cudaMalloc", 20, 20, 200), call("cudaMalloc", 50, 50, 300),
                                    call("cudaMalloc", 60, 60, 400)};
  const ProcessLabels labels = label_ledger_processes(meta, calls);
  EXPECT_EQ(labels.at(30), "rank 1");
  EXPECT_EQ(labels.at(20), "rank 0");
  EXPECT_EQ(labels.at(40), "process 5") << "fifth to make a call";
  EXPECT_EQ(labels.at(50), "process 3") << "a name two processes share names neither";
  EXPECT_EQ(labels.at(60), "process 4");
  EXPECT_EQ(process_label(labels, 99), "pid 99 (no ledger)");
}

// The matcher's buckets: coverage per (process, device) from the ledger's own word on the
// device, so that a method that saw device 0 only cannot hide device 1 in its total.
TEST(MatcherBuckets, CallsAreCountedWhereTheLedgerSaysTheyRan) {
  std::vector<Event> ledger, seen;
  for (int i = 0; i < 4; ++i) {
    ledger.push_back(call("cudaMalloc", 1, 1, 1000 * (i + 1), i % 2, i % 2 ? kBus1 : kBus0));
    if (i % 2 == 0) seen.push_back(call("cudaMalloc", 1, 1, 1000 * (i + 1) + 10, 0));  // device 1's calls unseen
  }
  seen.push_back(call("cudaFree", 1, 1, 9000, 1));  // a phantom on device 1
  const std::map<int, HostDevice> host = two_gpus();
  DeviceNames names(&host);
  names.learn(ledger);
  names.learn(seen);
  const ProcessLabels labels = {{1, "rank 0"}};
  MatchOptions opts;
  opts.buckets = {&labels, &names};
  const LayerScore s = match(ledger, seen, {layer::kRuntime}, opts).at(0);
  EXPECT_EQ(s.matched, 2);
  EXPECT_EQ(s.expected, 4);
  const json per = to_json(s)["per_device"];
  const json* d0 = bucket(per, "rank 0", kBus0);
  const json* d1 = bucket(per, "rank 0", kBus1);
  ASSERT_NE(d0, nullptr);
  ASSERT_NE(d1, nullptr);
  EXPECT_EQ((*d0)["matched"], 2);
  EXPECT_EQ((*d0)["expected"], 2);
  EXPECT_EQ((*d1)["matched"], 0);
  EXPECT_EQ((*d1)["expected"], 2);
  EXPECT_EQ((*d1)["phantom"], 1) << "the method's own device for what is in no ledger";
  EXPECT_EQ(s.device_compared, 2);
  EXPECT_EQ(s.device_equal, 2) << "ordinal 0 of process 1 is the ledger's " << kBus0;
  EXPECT_EQ(shortfalls(s.buckets), std::vector<std::string>{"rank 0 on 0000:1a:00.0: 0 of 2 (0.0%)"});
  EXPECT_TRUE(several(s.buckets));

  // Summed over repetitions the buckets add, like every other counter.
  LayerScore total;
  total.add(s);
  total.add(s);
  EXPECT_EQ(total.buckets[(BucketKey{"rank 0", kBus1})].expected, 4);
}

TEST(MatcherBuckets, DeviceAttributionIsComparedApartFromCoverage) {
  const std::vector<Event> ledger = {call("cudaMalloc", 1, 1, 1000, 1, kBus1), call("cudaMalloc", 1, 1, 2000, 1, kBus1),
                                     call("cudaGetLastError", 1, 1, 3000)};
  const std::vector<Event> seen = {call("cudaMalloc", 1, 1, 1010, 0, kBus0), call("cudaMalloc", 1, 1, 2010),
                                   call("cudaGetLastError", 1, 1, 3010, 1, kBus1)};
  DeviceNames names;
  names.learn(ledger);
  names.learn(seen);
  const ProcessLabels labels = {{1, "p"}};
  MatchOptions opts;
  opts.buckets = {&labels, &names};
  const LayerScore s = match(ledger, seen, {layer::kRuntime}, opts).at(0);
  EXPECT_EQ(s.matched, 3) << "coverage does not depend on the method's device";
  EXPECT_EQ(s.device_compared, 1) << "only where both name one";
  EXPECT_EQ(s.device_equal, 0);
  EXPECT_EQ(s.device_unnamed, 1);
  bool example = false;
  for (const auto& e : s.examples) example |= e.find("device of cudaMalloc") != std::string::npos;
  EXPECT_TRUE(example);
  EXPECT_NE(bucket(to_json(s)["per_device"], "p", kNoDevice), nullptr) << "cudaGetLastError is of no device";
}

// Kernel runs have no pairs: each bucket compares the runs the ledger expects there with the
// records the method put there. A method whose records name no device is compared per
// process, in one bucket that says so.
TEST(MatcherBuckets, KernelRunsPerDeviceAndPerProcessWhereTheMethodNamesNoDevice) {
  const std::vector<Event> ledger = {launch(1, 1, 100, 0, "k"), launch(1, 1, 200, 1, "k"), launch(1, 1, 300, 1, "k"),
                                     launch(2, 2, 100, 0, "k")};
  const std::map<int, HostDevice> host = two_gpus();
  DeviceNames names(&host);
  const ProcessLabels labels = {{1, "one"}, {2, "two"}};
  MatchOptions opts;
  opts.buckets = {&labels, &names};
  const std::vector<Event> named = {kernel(1, 150, 0, "k"), kernel(1, 250, 0, "k"), kernel(2, 150, 0, "k")};
  const LayerScore s = match(ledger, named, {layer::kGpuActivity}, opts).at(0);
  EXPECT_EQ(s.matched, 3) << "the total, per kernel, as before";
  const json per = to_json(s)["per_device"];
  EXPECT_EQ((*bucket(per, "one", kBus0))["matched"], 1);
  EXPECT_EQ((*bucket(per, "one", kBus0))["phantom"], 1) << "a run put on device 0 that the ledger has on 1";
  EXPECT_EQ((*bucket(per, "one", kBus1))["matched"], 0);
  EXPECT_EQ((*bucket(per, "one", kBus1))["expected"], 2);
  EXPECT_EQ((*bucket(per, "two", kBus0))["matched"], 1);

  const std::vector<Event> unnamed = {kernel(1, 150, std::nullopt, "k"), kernel(1, 250, std::nullopt, "k"),
                                      kernel(2, 150, std::nullopt, "k")};
  const json pooled = to_json(match(ledger, unnamed, {layer::kGpuActivity}, opts).at(0))["per_device"];
  ASSERT_NE(bucket(pooled, "one", kUnattributed), nullptr) << pooled.dump();
  EXPECT_EQ((*bucket(pooled, "one", kUnattributed))["expected"], 3);
  EXPECT_EQ((*bucket(pooled, "one", kUnattributed))["matched"], 2);
  EXPECT_EQ(bucket(pooled, "one", kBus1), nullptr) << "no device bucket the method cannot fill";
}

// driverapi's launches are driver calls, which the ledger records with no device: the
// method's kernels, each on its GPU, are compared with the process's whole, not read as
// put on another GPU (a complete layer once read PARTLY OBSERVED that way).
TEST(MatcherBuckets, KernelsTheLedgerPlacesOnNoDeviceAreComparedPerProcess) {
  Event driver_launch = launch(1, 1, 100, 0, "k");
  driver_launch.device.reset();
  const std::vector<Event> ledger = {driver_launch, driver_launch, launch(2, 2, 100, 0, "k")};
  const std::map<int, HostDevice> host = two_gpus();
  DeviceNames names(&host);
  const ProcessLabels labels = {{1, "one"}, {2, "two"}};
  MatchOptions opts;
  opts.buckets = {&labels, &names};
  const std::vector<Event> seen = {kernel(1, 150, 0, "k", kBus0), kernel(1, 250, 0, "k", kBus0),
                                   kernel(2, 150, 0, "k", kBus0)};
  const json per = to_json(match(ledger, seen, {layer::kGpuActivity}, opts).at(0))["per_device"];
  ASSERT_NE(bucket(per, "one", kNoDevice), nullptr) << per.dump();
  EXPECT_EQ((*bucket(per, "one", kNoDevice))["expected"], 2);
  EXPECT_EQ((*bucket(per, "one", kNoDevice))["matched"], 2);
  EXPECT_EQ((*bucket(per, "one", kNoDevice))["phantom"], 0);
  EXPECT_EQ(bucket(per, "one", kBus0), nullptr) << "process one is judged whole";
  EXPECT_EQ((*bucket(per, "two", kBus0))["matched"], 1) << "a process whose ledger names its GPU keeps its buckets";
}

// A run's processes, summed over repetitions under keys that do not depend on pids, and
// matched to the reference's: by the devices both used, else by the order of first calls.
TEST(CommandProcesses, MatchedByDevicesElseByOrder) {
  const std::map<int, HostDevice> host = two_gpus();
  DeviceNames names(&host);
  // Reference: a launcher (no CUDA), rank 0 on GPU 0, rank 1 on GPU 1 (it started first).
  const std::vector<Event> ref_run = {call("cudaMalloc", 101, 101, 500, 0), kernel(101, 600, 0, "k"),
                                      call("cudaMalloc", 102, 102, 400, 1), kernel(102, 450, 1, "k"),
                                      kernel(102, 460, 1, "k")};
  ProcessTallies reference;
  add_run(reference, count_by_process(ref_run, names));
  ASSERT_EQ(reference.size(), 2u);
  EXPECT_EQ(reference.begin()->second.devices, kBus0);

  // A method that names devices, whose rank 0 happened to start first this time, and which
  // saw none of rank 1's kernels.
  const std::vector<Event> named_run = {call("cudaMalloc", 201, 201, 100, 0), kernel(201, 150, 0, "k"),
                                        call("cudaMalloc", 202, 202, 300, 1)};
  ProcessTallies named;
  add_run(named, count_by_process(named_run, names));
  const auto pairs = match_processes(reference, named);
  ASSERT_EQ(pairs.size(), 2u);
  for (const auto& p : pairs) {
    ASSERT_NE(p.seen, nullptr);
    EXPECT_EQ(p.reference->devices, p.seen->devices) << "by the device, not the order";
    EXPECT_EQ(p.how, "the devices both used");
  }

  // A method that names no device: matched by order.
  const std::vector<Event> blind_run = {call("cudaMalloc", 301, 301, 100), call("cudaMalloc", 302, 302, 50),
                                        call("cudaMalloc", 303, 303, 700)};
  ProcessTallies blind;
  add_run(blind, count_by_process(blind_run, names));
  const auto by_order = match_processes(reference, blind);
  ASSERT_EQ(by_order.size(), 3u) << "two matched, one only this method saw";
  EXPECT_EQ(by_order[0].how, "the order of their first CUDA call");
  EXPECT_EQ(by_order[0].seen->pids, std::vector<int64_t>{302});
  EXPECT_EQ(by_order[2].reference, nullptr);

  const PerDeviceInput ref_in{"cupti", 1, {layer::kRuntime, layer::kGpuActivity}, &reference};
  const json v = per_device_verdict(ref_in,
                                    {{"named", 1, {layer::kRuntime, layer::kGpuActivity}, &named},
                                     {"blind", 1, {layer::kRuntime}, &blind}},
                                    {}, {});
  ASSERT_TRUE(v["short"].contains("named")) << v.dump(1);
  const json short_named = v["short"]["named"][layer::kGpuActivity];
  ASSERT_EQ(short_named.size(), 1u) << v.dump(1);
  EXPECT_NE(short_named[0].get<std::string>().find(std::string("on ") + kBus1 + ": 0 of 2"), std::string::npos)
      << short_named.dump();
  EXPECT_FALSE(v["short"]["named"].contains(layer::kRuntime)) << "every process's calls seen";
  bool unattributed = false;
  for (const auto& row : v["rows"])
    if (row["method"] == "blind") unattributed |= row["device"] == kUnattributed;
  EXPECT_TRUE(unattributed) << "a method without devices is compared per process, and says so";
}

// A method that names devices on some records and not on others (preload's generic path,
// nsys's calls other than launches): the process's whole is what decides, and its per-GPU
// counts are said to be a floor, not a shortfall of their own.
// torch's mp.spawn: the launcher asks CUDA for the device count before it spawns the ranks.
// A method that sees the launcher's call (CUPTI's reference did not) must not pair the
// reference's rank 0 with the launcher by order: that read as "rank 0: 0 of its calls".
TEST(CommandProcesses, ALauncherBeforeTheRanksDoesNotShiftThem) {
  DeviceNames names;
  ProcessTallies reference, method;
  add_run(reference, count_by_process({call("cudaMalloc", 11, 11, 100), call("cudaMalloc", 11, 11, 110),
                                       call("cudaMalloc", 12, 12, 105), call("cudaFree", 12, 12, 120)},
                                      names));
  add_run(method, count_by_process({call("cuDeviceGetCount", 20, 20, 10), call("cudaMalloc", 21, 21, 100),
                                    call("cudaMalloc", 21, 21, 110), call("cudaMalloc", 22, 22, 105),
                                    call("cudaFree", 22, 22, 120)},
                                   names));
  const auto pairs = match_processes(reference, method);
  ASSERT_EQ(pairs.size(), 3u);
  ASSERT_NE(pairs[0].seen, nullptr);
  EXPECT_EQ(pairs[0].seen->pids, std::vector<int64_t>{21}) << "rank 0 with rank 0, not with the launcher";
  EXPECT_EQ(pairs[0].how, "the calls both made");
  ASSERT_NE(pairs[1].seen, nullptr);
  EXPECT_EQ(pairs[1].seen->pids, std::vector<int64_t>{22});
  EXPECT_EQ(pairs[2].reference, nullptr) << "the launcher is only this method's";
  EXPECT_EQ(pairs[2].seen->pids, std::vector<int64_t>{20});
  const PerDeviceInput ref_in{"cupti", 1, {layer::kRuntime}, &reference};
  const json v = per_device_verdict(ref_in, {{"blind", 1, {layer::kRuntime}, &method}}, {}, {});
  EXPECT_FALSE(v["short"].contains("blind")) << "every rank's calls seen: " << v.dump(1);
}

TEST(CommandProcesses, RecordsNamingNoDeviceMakeTheProcessTheJudge) {
  DeviceNames names;
  ProcessTallies reference, partial;
  add_run(reference, count_by_process({call("cudaMalloc", 1, 1, 10, 0, kBus0), call("cudaFree", 1, 1, 20, 0, kBus0)},
                                      names));
  add_run(partial, count_by_process({call("cudaMalloc", 2, 2, 10, 0, kBus0), call("cudaFree", 2, 2, 20)}, names));
  const PerDeviceInput ref_in{"cupti", 1, {layer::kRuntime}, &reference};
  const json whole = per_device_verdict(ref_in, {{"partial", 1, {layer::kRuntime}, &partial}}, {}, {});
  EXPECT_FALSE(whole["short"].contains("partial")) << "every call seen, one without its device: " << whole.dump(1);
  bool floor_row = false;
  for (const auto& row : whole["rows"]) floor_row |= row["device"] == kAllDevices && row["records_naming_no_device"] == 1;
  EXPECT_TRUE(floor_row) << whole.dump(1);

  ProcessTallies missing;
  add_run(missing, count_by_process({call("cudaMalloc", 3, 3, 10), call("cudaMalloc", 3, 3, 15, 0, kBus0)}, names));
  const json v = per_device_verdict(ref_in, {{"missing", 1, {layer::kRuntime}, &missing}}, {}, {});
  ASSERT_TRUE(v["short"].contains("missing")) << v.dump(1);
  const json lines = v["short"]["missing"][layer::kRuntime];
  ASSERT_EQ(lines.size(), 2u) << lines.dump();
  EXPECT_NE(lines[0].get<std::string>().find("(all its devices): 1 of 2"), std::string::npos) << lines.dump();
  EXPECT_NE(lines[1].get<std::string>().find("a floor"), std::string::npos) << lines.dump();
}

TEST(CommandProcesses, RepetitionsAddUnderTheSameKeys) {
  DeviceNames names;
  ProcessTallies t;
  for (int rep = 0; rep < 3; ++rep) {
    const int64_t base = 1000 * (rep + 1);
    add_run(t, count_by_process({call("cudaMalloc", base + 1, base + 1, 10, 0, kBus0),
                                 call("cudaMalloc", base + 2, base + 2, 20, 0, kBus1)},
                                names));
  }
  ASSERT_EQ(t.size(), 2u);
  for (const auto& [key, p] : t) {
    EXPECT_EQ(p.runs, 3);
    EXPECT_EQ(p.pids.size(), 3u);
    EXPECT_EQ(p.by_device.at(p.devices).at(layer::kRuntime).at("cudaMalloc"), 3);
  }
}

// A process's or GPU's share is rounded down as the verdict's is: 3,863 of 4,519 is 85.48%,
// which read "85.5%" beside a verdict of "85.4%"; near whole, the missing are counted.
TEST(PerDevice, ShortfallSharesAreRoundedDownLikeTheVerdict) {
  Buckets b;
  b[{"rank 0", "0000:1a:00.0"}] = {4519, 3863, 656, 0};
  b[{"rank 1", "0000:1b:00.0"}] = {14821, 14820, 1, 0};
  EXPECT_EQ(shortfalls(b), (std::vector<std::string>{"rank 0 on 0000:1a:00.0: 3863 of 4519 (85.4%)",
                                                     "rank 1 on 0000:1b:00.0: 14820 of 14821 (99.9%, 1 of 14821 missing)"}));
}
