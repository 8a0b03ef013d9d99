// The verdict where there is no ledger: names folded into families, the reference per
// layer, coverage, and layers not observed named with their reason.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/out/summary.h"
#include "harness/score/matcher.h"
#include "harness/score/verdict.h"

using namespace cudatrace;
using nlohmann::json;

namespace {

Event ev(const std::string& layer, const std::string& name, json args = json::object(), int64_t pid = 1) {
  Event e;
  e.layer = layer;
  e.name = name;
  e.pid = pid;
  e.tid = pid;
  e.ts = 1;
  e.args = std::move(args);
  return e;
}

MethodView view(const std::string& method, std::vector<std::string> intended, std::set<std::string> observed,
                const std::vector<Event>& events, int reps = 1) {
  MethodView v{method, true, std::move(intended), std::move(observed), {}, {}, reps};
  count_families(events, v.counts);
  return v;
}

const json& row(const json& verdict, const std::string& method, const std::string& layer) {
  for (const auto& r : verdict["coverage"])
    if (r["method"] == method && r["layer"] == layer) return r;
  static const json none;
  ADD_FAILURE() << "no row for " << method << " " << layer << " in " << verdict.dump(1);
  return none;
}

}  // namespace

TEST(Verdict, KernelNamesFoldIntoOneFamily) {
  EXPECT_EQ(kernel_family("_Z6vecaddPKfS0_Pfi"), "vecadd");
  EXPECT_EQ(kernel_family("vecadd(float const*, float const*, float*, int)"), "vecadd");
  EXPECT_EQ(kernel_family("void scale<float>(float*, int)"), "scale");
  EXPECT_EQ(kernel_family("ptx_fill"), "ptx_fill");
  // A symbol cut at 63 characters (cupti's collector) names the same family as the whole one.
  const std::string whole = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_";
  EXPECT_EQ(kernel_family(whole), "at::native::vectorized_elementwise_kernel");
  EXPECT_EQ(kernel_family(whole.substr(0, 63)), kernel_family(whole));
  EXPECT_EQ(kernel_family("_ZNSt6vector4sizeEv"), "std::vector::size");
  const std::string anon = "_ZN15stream_executor3gpu56_GLOBAL__N__0adca48f_23_delay_kernel_implEPVNS1_9GpuSemaphoreE";
  EXPECT_EQ(kernel_family(anon), kernel_family(anon.substr(0, 63)));
}

// torch's softmax kernel lives in an anonymous namespace. CUPTI's reference keeps 63 bytes of
// its mangled name, of which nvcc's namespace id takes 48; the PyTorch profiler names it
// demangled, whole. Both say "{anonymous}", and the family the reference cut joins the
// method's whole one: on an H100 the profiler's 102 kernels of torch_train_step read
// "partial 73.5%" (27 "only it saw") before.
TEST(Verdict, AKernelNameTheReferenceCutJoinsTheWholeOneItBegins) {
  const std::string cut = "_ZN43_GLOBAL__N__b6de9c8c_10_SoftMax_cu_9f978f6320softmax_warp_";
  ASSERT_EQ(cut.size(), 63u);
  const std::string demangled =
      "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, float const*, int, "
      "int, int, bool const*, int, bool)";
  EXPECT_EQ(kernel_family(cut), "{anonymous}::softmax_warp_");
  EXPECT_EQ(kernel_family(demangled), "{anonymous}::softmax_warp_forward");
  EXPECT_EQ(kernel_family("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*)"),
            "at::native::{anonymous}::nll_loss_forward_reduce");  // cut at 63 characters first

  std::map<std::string, int64_t> reference{{"{anonymous}::softmax_warp_", 10}, {"at::native::reduce_kernel", 3}, {"k", 2}};
  std::map<std::string, int64_t> seen{{"{anonymous}::softmax_warp_forward", 10},
                                      {"at::native::vectorized_elementwise_kernel", 3},  // another kernel: not joined
                                      {"kx", 2}};                                        // too short to say
  EXPECT_EQ(join_cut_kernel_families(reference, seen), 10);
  EXPECT_EQ(seen["{anonymous}::softmax_warp_"], 10);
  EXPECT_FALSE(seen.count("{anonymous}::softmax_warp_forward"));
  EXPECT_EQ(seen["at::native::vectorized_elementwise_kernel"], 3);
  EXPECT_EQ(seen["kx"], 2);

  // Through the verdict: complete, and the join is said.
  std::vector<Event> ref_kernels, method_kernels;
  for (int i = 0; i < 4; ++i) ref_kernels.push_back(ev("gpu-activity", cut, {{"kernel", cut}}));
  for (int i = 0; i < 4; ++i) method_kernels.push_back(ev("gpu-activity", demangled, {{"kernel", demangled}}));
  MethodView cupti = view("cupti", {"gpu-activity"}, {"gpu-activity"}, ref_kernels);
  MethodView profiler = view("profiler", {"gpu-activity"}, {"gpu-activity"}, method_kernels);
  const json v = command_verdict({cupti, profiler});
  const json& r = row(v, "profiler", "gpu-activity");
  EXPECT_EQ(r["status"], "complete") << r.dump();
  EXPECT_EQ(r["only_it_saw"], 0) << r.dump();
  EXPECT_EQ(r["kernels_joined_by_name_prefix"], 4) << r.dump();
}

// DDP on two H200s under the PyTorch profiler, against CUPTI: the reference cut two kernels
// of one anonymous namespace at 63 bytes, one to "at::native::{anonymous}" and one after
// "CatArr"; the profiler wrote both whole. The shorter reference name begins every one of
// them, so it must not take the kernel the longer one names.
TEST(Verdict, AKernelJoinsTheLongestReferenceNameItBegins) {
  std::map<std::string, int64_t> reference{{"at::native::{anonymous}", 30}, {"at::native::{anonymous}::CatArr", 2}};
  std::map<std::string, int64_t> seen{{"at::native::{anonymous}::CatArrayBatchedCopy_alignedK_contig", 2},
                                      {"at::native::{anonymous}::multi_tensor_apply_kernel", 10},
                                      {"at::native::{anonymous}::vectorized_kernel", 20}};
  EXPECT_EQ(join_cut_kernel_families(reference, seen), 32);
  EXPECT_EQ(seen["at::native::{anonymous}::CatArr"], 2);
  EXPECT_EQ(seen["at::native::{anonymous}"], 30);
  EXPECT_EQ(seen.size(), 2u) << "nothing left that only the profiler saw";
}

TEST(Verdict, CallsFoldIntoFamiliesAndKernelRunsAreCountedOncePerLaunch) {
  FamilyCounts c;
  count_families({ev("driver", "cuMemAlloc_v2"), ev("driver", "cuMemAlloc"), ev("runtime", "__cudaLaunchKernel"),
                  ev("runtime", "cudaLaunchKernel_ptsz"), ev("runtime", "__cudaRegisterFatBinary"),
                  ev("device", "k", {{"kernel", "k"}, {"launch", 0}}), ev("device", "k", {{"kernel", "k"}, {"launch", 0}}),
                  ev("device", "k", {{"kernel", "k"}, {"launch", 1}}), ev("device", "k", {{"kernel", "k"}, {"launch", 0}}, 2),
                  ev("gpu-activity", "_Z1kv", {{"kernel", "_Z1kv"}})},
                 c);
  EXPECT_EQ(c["driver"], (std::map<std::string, int64_t>{{"cuMemAlloc", 2}}));
  EXPECT_EQ(c["runtime"], (std::map<std::string, int64_t>{{"cudaLaunchKernel", 2}})) << "cudart plumbing is no call";
  EXPECT_EQ(c["device"]["k"], 3) << "launches 0 and 1 of pid 1, launch 0 of pid 2";
  EXPECT_EQ(c["gpu-activity"]["k"], 1);
}

// A launch's events come together (devhook writes a launch's blocks in (launch, execution)
// order), and the counter keeps only each process's last launch, so processes that
// interleave, a graph's executions and a kernel name folded from its mangled and its
// demangled form all count as before; only a launch met again after another is not
// recognised, which no method writes.
TEST(Verdict, DeviceLaunchesAreCountedFromEachProcesssLastLaunch) {
  FamilyCounts c;
  std::vector<Event> events;
  for (int64_t launch = 0; launch < 1000; ++launch)
    for (int64_t pid : {1, 2})
      for (int block = 0; block < 3; ++block)
        events.push_back(ev("device", "k", {{"kernel", launch % 2 ? "_Z1kPf" : "k(float*)"}, {"launch", launch}, {"blocks", 1}}, pid));
  for (int64_t execution : {0, 1, 1, 2})  // a graph launch's kernel run three times
    events.push_back(ev("device", "g", {{"kernel", "g"}, {"launch", 5000}, {"execution", execution}}, 1));
  count_families(events, c);
  EXPECT_EQ(c["device"]["k"], 2000) << "1,000 launches in each of two processes, three blocks each";
  EXPECT_EQ(c[kDeviceBlocks]["k"], 6000);
  EXPECT_EQ(c["device"]["g"], 3) << "each execution of a graph launch's kernel is a run";
}

TEST(Verdict, CuptiIsTheReferenceAndShortfallsAreNamed) {
  std::vector<Event> all{ev("runtime", "cudaMalloc"), ev("runtime", "cudaMalloc"), ev("runtime", "cudaGraphLaunch"),
                         ev("runtime", "cudaFree"), ev("gpu-activity", "k", {{"kernel", "k"}}),
                         ev("gpu-activity", "k", {{"kernel", "k"}})};
  std::vector<Event> partial{ev("runtime", "cudaMalloc"), ev("runtime", "cudaMalloc"), ev("runtime", "cudaFree"),
                             ev("runtime", "cudaPeekAtLastError")};
  std::vector<Event> blocks{ev("device", "k", {{"kernel", "k"}, {"launch", 0}})};
  std::vector<Event> all_and_a_driver_call = all;  // a driver layer preload can miss
  all_and_a_driver_call.push_back(ev("driver", "cuInit"));
  MethodView cupti = view("cupti", {"runtime", "driver", "gpu-activity"}, {"runtime", "driver", "gpu-activity"},
                          all_and_a_driver_call);
  MethodView preload = view("preload", {"runtime", "driver"}, {"runtime"}, partial);
  preload.unobserved["driver"] = "never reached libcuda";
  MethodView devhook = view("devhook", {"device"}, {"device"}, blocks);
  const json v = command_verdict({cupti, preload, devhook});

  EXPECT_NE(v["reference"]["runtime"]["source"].get<std::string>().find("cupti"), std::string::npos);
  EXPECT_EQ(v["reference"]["runtime"]["total"], 4);
  const json& rt = row(v, "preload", "runtime");
  EXPECT_DOUBLE_EQ(rt["coverage"].get<double>(), 0.75);
  EXPECT_EQ(rt["status"], "partial");
  EXPECT_EQ(rt["missed_families"], json({"cudaGraphLaunch"}));
  EXPECT_EQ(rt["only_it_saw"], 1) << "cudaPeekAtLastError";
  EXPECT_EQ(rt["matched"], 3) << "of the reference, apart from what only it saw";
  // With no reason from the tracer, the method's own limit for the layer is the reason.
  EXPECT_EQ(rt["why"], "the method names no limit for this layer (Method::limits)") << "a shortfall never goes silent";
  MethodView limited = preload;
  limited.limits["runtime"] = "a static cudart never reaches the shim";
  EXPECT_EQ(row(command_verdict({cupti, limited, devhook}), "preload", "runtime")["why"],
            "what this method cannot see: a static cudart never reaches the shim");
  limited.loss = {{"dropped", 2}, {"ring_full", 0}};
  EXPECT_EQ(row(command_verdict({cupti, limited, devhook}), "preload", "runtime")["why"],
            "the tracer lost events (dropped=2)") << "loss explains a shortfall before a general limit does";
  const json& drv = row(v, "preload", "driver");
  EXPECT_EQ(drv["status"], "not observed");
  EXPECT_EQ(drv["reason"], "never reached libcuda");
  EXPECT_EQ(v["families"]["runtime"]["cudaGraphLaunch"]["preload"], 0) << "a missed family shows as 0, never absent";
  // Kernel runs: devhook's device layer against CUPTI's kernel activity.
  EXPECT_DOUBLE_EQ(row(v, "devhook", "device")["coverage"].get<double>(), 0.5);
  EXPECT_EQ(row(v, "cupti", "runtime")["status"], "complete");
  EXPECT_FALSE(row(v, "cupti", "runtime").contains("why"));

  // A call cudart makes only for CUPTI is no shortfall of another method.
  all.push_back(ev("driver", "cuKernelGetName"));
  all.push_back(ev("driver", "cuLaunchKernel"));
  MethodView cupti2 = view("cupti", {"runtime", "driver", "gpu-activity"}, {"runtime", "driver", "gpu-activity"}, all);
  MethodView uprobe = view("uprobe", {"runtime", "driver"}, {"runtime", "driver"}, {ev("driver", "cuLaunchKernel")});
  const json u = command_verdict({cupti2, uprobe});
  EXPECT_EQ(u["reference"]["driver"]["total"], 1);
  EXPECT_EQ(u["reference"]["driver"]["not_counted"]["cuKernelGetName"]["calls"], 1);
  EXPECT_EQ(row(u, "uprobe", "driver")["status"], "complete");
  const std::string text = verdict_text(u);
  EXPECT_NE(text.find("not counted: 1 cuKernelGetName (cudart asks it once per launch only while CUPTI is attached"),
            std::string::npos)
      << text;

  // The method's own reason for a part it could not see is the one shown.
  preload.partly_unobserved["runtime"] = "cudart linked into libfoo.so: its calls never reach the shim";
  const json w = command_verdict({cupti, preload, devhook});
  EXPECT_EQ(row(w, "preload", "runtime")["why"], "cudart linked into libfoo.so: its calls never reach the shim");
  // The console line carries the number and the reason together.
  const std::string text2 = verdict_text(w);
  EXPECT_NE(text2.find(" partial: matched 3 of the reference's 4 (75.0%); besides, 1 only it saw; missed entirely: "
                       "cudaGraphLaunch; why: cudart linked into libfoo.so: its calls never reach the shim"),
            std::string::npos)
      << text2;
  EXPECT_NE(text2.find("NOT OBSERVED: never reached libcuda"), std::string::npos) << text2;
}

// More seen than the reference holds never reads as more than all of it: what was matched
// is a share of the reference, what only this method saw is counted apart.
TEST(Verdict, CoverageNeverExceedsTheReference) {
  std::vector<Event> ref{ev("driver", "cuLaunchKernel"), ev("driver", "cuLaunchKernel")};
  std::vector<Event> more{ev("driver", "cuLaunchKernel"), ev("driver", "cuLaunchKernel"), ev("driver", "cuLaunchKernel"),
                          ev("driver", "cuMemAlloc")};
  const json v = command_verdict({view("cupti", {"driver"}, {"driver"}, ref), view("preload", {"driver"}, {"driver"}, more)});
  const json& r = row(v, "preload", "driver");
  EXPECT_EQ(r["matched"], 2);
  EXPECT_EQ(r["only_it_saw"], 2);
  EXPECT_LE(r["coverage"].get<double>(), 1.0);
  const std::string text = verdict_text(v);
  EXPECT_NE(text.find("complete: matched 2 of the reference's 2 (100.0%); besides, 2 only it saw"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("4 of 2"), std::string::npos) << text;
}

TEST(Verdict, WithoutCuptiTheReferenceIsTheUnionPerRepetition) {
  std::vector<Event> a{ev("runtime", "cudaMalloc"), ev("runtime", "cudaMalloc")};  // two reps of one call
  std::vector<Event> b{ev("runtime", "cudaFree")};
  const json v = command_verdict({view("preload", {"runtime"}, {"runtime"}, a, 2), view("uprobe", {"runtime"}, {"runtime"}, b)});
  EXPECT_NE(v["reference"]["runtime"]["source"].get<std::string>().find("union"), std::string::npos);
  EXPECT_EQ(v["reference"]["runtime"]["total"], 2) << "cudaMalloc once per repetition, cudaFree once";
  EXPECT_DOUBLE_EQ(row(v, "preload", "runtime")["coverage"].get<double>(), 0.5);
  EXPECT_EQ(row(v, "uprobe", "runtime")["missed_families"], json({"cudaMalloc"}));
}

TEST(Verdict, UnobservedLayersCarryTheTracersReasonOrSayWhy) {
  Method m{.name = "x"};
  m.layers = {"runtime", "driver", "device"};
  TracerReport r;
  r.layers = {"runtime"};
  r.unobserved["driver"] = "no libcuda";
  json u = unobserved_layers(m, r);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0], json({{"layer", "driver"}, {"reason", "no libcuda"}}));
  EXPECT_EQ(u[1]["layer"], "device");
  EXPECT_FALSE(u[1]["reason"].get<std::string>().empty());
  r.error = "collector died";
  EXPECT_NE(unobserved_layers(m, r)[1]["reason"].get<std::string>().find("collector died"), std::string::npos);
}

// A driver-API program makes no runtime call: a method that cannot see the runtime (no
// cudart to probe) missed nothing there. With CUPTI's 0 the layer is "nothing to see", its
// reason kept; with a union's 0 (no CUPTI run) it stays not observed: all may have been blind.
TEST(CommandVerdict, ALayerCuptiSawNothingOfIsNothingToSeeForAMethodThatCouldNotSeeIt) {
  const std::vector<Event> driver_only = {ev("driver", "cuInit"), ev("driver", "cuLaunchKernel")};
  MethodView cupti = view("cupti", {"runtime", "driver"}, {"runtime", "driver"}, driver_only);
  MethodView uprobe = view("uprobe", {"runtime", "driver"}, {"driver"}, driver_only);
  uprobe.unobserved["runtime"] = "no cudart to probe";
  const json v = command_verdict({cupti, uprobe});
  const json& r = row(v, "uprobe", "runtime");
  EXPECT_EQ(r["status"], "nothing to see") << r.dump();
  EXPECT_NE(r.value("why", "").find("no cudart to probe"), std::string::npos) << r.dump();
  EXPECT_EQ(row(command_verdict({uprobe}), "uprobe", "runtime")["status"], "not observed");
  EXPECT_NE(verdict_text(v).find("nothing to see (0 seen); why: CUPTI saw no call"), std::string::npos) << verdict_text(v);
}

// The ledger side of real patterns: graph replays, captured launches, a program's own
// driver calls.
TEST(MatcherRealPatterns, GraphReplaysCountAndCapturedLaunchesDoNot) {
  Event captured = ev("runtime", "cudaLaunchKernel", {{"kernel", "k"}, {"grid", {4, 1, 1}}, {"expect", "captured"}});
  Event exec = ev("execution", "k", {{"grid", {4, 1, 1}}, {"block", {32, 1, 1}}, {"times", 5}});
  std::vector<Event> seen;
  for (int i = 0; i < 5; ++i) seen.push_back(ev("gpu-activity", "k", {{"kernel", "k"}}));
  auto scores = match({captured, exec}, seen, {"gpu-activity", "device"});
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].expected, 5) << "the replays' executions, not the capture-time launch";
  EXPECT_EQ(scores[0].matched, 5);
  EXPECT_EQ(scores[1].expected, 20) << "5 runs x 4 blocks";
}

TEST(MatcherRealPatterns, AProgramsOwnDriverCallsAreScoredExactly) {
  Event init = ev("driver", "cuInit");
  init.ts = 100;
  init.dur = 50;
  init.ret = 0;
  Event alloc = ev("driver", "cuMemAlloc", {{"bytes", 64}});
  alloc.ts = 200;
  alloc.dur = 50;
  alloc.ret = 2;
  Event launch = ev("driver", "cuLaunchKernel", {{"kernel", "k"}, {"grid", {2, 1, 1}}});
  launch.ts = 300;
  launch.dur = 10;
  launch.ret = 0;
  Event seen_alloc = ev("driver", "cuMemAlloc_v2", {{"bytes", 64}});
  seen_alloc.ts = 210;
  seen_alloc.ret = 2;
  Event other = ev("driver", "cuCtxGetCurrent");
  other.ts = 120;
  auto scores = match({init, alloc, launch}, {seen_alloc, other, ev("gpu-activity", "k", {{"kernel", "k"}})},
                      {"driver", "gpu-activity"});
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].expected, 3);
  EXPECT_EQ(scores[0].matched, 1);
  EXPECT_EQ(scores[0].missing, 2);
  EXPECT_EQ(scores[0].unscored, 1) << "a driver family the program never called";
  EXPECT_EQ(scores[0].ret_equal, 1);
  EXPECT_EQ(scores[1].expected, 1) << "a driver launch that succeeded runs its kernel";
}

// A method that lost events is never complete, even where the reference is the union of
// what the methods kept (no cupti run): 10 M calls with four fifths lost read "complete"
// before, as the union could not see what every method missed.
TEST(Verdict, LostEventsAreNeverComplete) {
  std::vector<Event> kept{ev("runtime", "cudaGetDevice"), ev("runtime", "cudaGetDevice")};
  MethodView preload = view("preload", {"runtime", "driver"}, {"runtime"}, kept);
  preload.loss = {{"over_bound_records", 8}, {"dropped", 0}};
  const json v = command_verdict({preload});
  const json& rt = row(v, "preload", "runtime");
  EXPECT_EQ(rt["status"], "lost events") << rt.dump();
  EXPECT_EQ(rt["lost"], 8);
  EXPECT_EQ(rt["why"], "the tracer lost events (over_bound_records=8)");
  EXPECT_NE(verdict_text(v).find("LOST 8 events"), std::string::npos) << verdict_text(v);
  preload.loss = {{"over_bound_records", 0}};
  EXPECT_EQ(row(command_verdict({preload}), "preload", "runtime")["status"], "complete") << "no loss, complete";
  // A part the method says it cannot see (a cudart inside cuBLAS) is no part of a union
  // reference either: all of what was seen is not all there was.
  preload.partly_unobserved["runtime"] = "calls from libcublas.so.13's own cudart";
  EXPECT_EQ(row(command_verdict({preload}), "preload", "runtime")["status"], "partly observed");
  EXPECT_EQ(loss_totals(json{{"a", 2}, {"b", -1}, {"c", "x"}, {"d", 3}}, "preload").events, 5);
}

// Loss counters of other units than events (files, bytes, a batch of calls) are never added
// to the events lost: each unit is summed apart. A run that lost only such things is still
// not complete, and says what it lost in its units.
TEST(Verdict, LossIsCountedInTheUnitOfEachCounter) {
  const json loss = {{"api_calls_not_received", 66}, {"over_bound_records", 3}, {"kineto_log_unread_bytes", 1048576},
                     {"traces_cut", 1}, {"changed_files", 2}, {"flag", true}};
  const LossTotals cupti = loss_totals(loss, "cupti");
  EXPECT_EQ(cupti.events, 66) << "cupti's spool records hold batches of calls, counted again as not received";
  EXPECT_EQ(cupti.other, (std::map<std::string, int64_t>{{"bytes", 1048576}, {"files", 2}, {"spool records", 3}, {"traces", 1}}));
  EXPECT_EQ(loss_totals(loss, "cupti-bare").other.count("spool records"), 1u) << "a cupti variant";
  EXPECT_EQ(loss_totals(loss, "uprobe").events, 69) << "uprobe's spool record is one call";
  EXPECT_EQ(cupti.text(), "66 events, 1048576 bytes, 2 files, 3 spool records, 1 traces");
  const LossTotals ring = loss_totals(json{{"malformed_records", 2}, {"ring_full_status_records", 1}, {"ring_full", 4}}, "cupti");
  EXPECT_EQ(ring.events, 4) << "a malformed ring sample is a batch; a status record is no call";
  EXPECT_EQ(ring.other, (std::map<std::string, int64_t>{{"spool records", 2}, {"status records", 1}}));

  std::vector<Event> kept{ev("runtime", "cudaGetDevice"), ev("runtime", "cudaGetDevice")};
  MethodView torchprof = view("torchprof", {"runtime"}, {"runtime"}, kept);
  torchprof.loss = {{"kineto_log_unread_bytes", 4096}, {"events_unread", 0}};
  const json v = command_verdict({torchprof});
  const json rt = row(v, "torchprof", "runtime");
  EXPECT_EQ(rt["status"], "lost events") << "bytes unread are a loss: not complete";
  EXPECT_EQ(rt["lost"], 0) << "no event was counted lost";
  EXPECT_EQ(rt["lost_other"]["bytes"], 4096);
  EXPECT_NE(verdict_text(v).find("LOST 4096 bytes"), std::string::npos) << verdict_text(v);
}

// A shortfall never reads 100.0%.
TEST(Verdict, SharesNeverRoundAShortfallUp) {
  EXPECT_EQ(share_text(14821, 14821), "100.0%");
  EXPECT_EQ(share_text(14820, 14821), "99.9%, 1 of 14821 missing");
  EXPECT_EQ(share_text(1, 3), "33.3%");
  EXPECT_EQ(share_text(2, 3), "66.6%") << "rounded down";
  EXPECT_EQ(share_text(0, 5), "0.0%");
  EXPECT_EQ(share_text(0, 0), "100.0%") << "nothing expected, nothing missing";
}

// Blocks that differ between the method's run and CUPTI's: compared kernel by kernel, and
// told apart from the method's own shortfall, which its launches' grids show in its own run
// (jax_step under sanitizer read "complete" with 6,277,682 blocks against 6,282,402).
TEST(CommandVerdict, BlocksAreComparedPerKernelAndTheirDifferenceExplained) {
  MethodView cupti = view("cupti", {"gpu-activity"}, {"gpu-activity"}, {});
  cupti.counts[layer::kGpuActivity] = {{"k1", 2}, {"k2", 1}};
  cupti.counts[kActivityBlocks] = {{"k1", 200}, {"k2", 50}};
  MethodView san = view("sanitizer", {"device"}, {"device"}, {});
  san.counts[layer::kDevice] = {{"k1", 2}, {"k3", 1}};
  san.counts[kDeviceBlocks] = {{"k1", 180}, {"k3", 60}};
  san.counts[kDeviceGridBlocks] = {{"k1", 180}, {"k3", 60}};
  nlohmann::json b = compare_blocks(cupti, san);
  EXPECT_EQ(b["reference"], 250);
  EXPECT_EQ(b["seen"], 240);
  EXPECT_EQ(b["launched"], 240);
  EXPECT_EQ(b["kernels_differing"].size(), 3u);
  const std::string why = b["why"].get<std::string>();
  EXPECT_NE(why.find("counted every block its own launches asked for"), std::string::npos) << why;
  EXPECT_NE(why.find("1 kernel(s) ran in both runs with other block totals"), std::string::npos) << why;
  EXPECT_NE(why.find("2 kernel(s) ran in one run only"), std::string::npos) << why;
  // Short of its own launches' grids: the method's own loss, whatever CUPTI's run did.
  san.counts[kDeviceBlocks]["k1"] = 170;
  b = compare_blocks(cupti, san);
  EXPECT_EQ(b["own_short_kernels"], 1);
  EXPECT_NE(b["why"].get<std::string>().find("fewer blocks than its own launches asked for in 1 kernel(s)"),
            std::string::npos)
      << b.dump();
  // More blocks than its own launches asked for: said as such, never as a loss.
  san.counts[kDeviceBlocks]["k1"] = 190;
  b = compare_blocks(cupti, san);
  EXPECT_NE(b["why"].get<std::string>().find("more blocks than its own launches asked for in 1 kernel(s)"),
            std::string::npos)
      << b.dump();
  EXPECT_EQ(b["why"].get<std::string>().find("fewer"), std::string::npos) << b.dump();
  // The same blocks everywhere: nothing to explain.
  san.counts[layer::kDevice] = cupti.counts[layer::kGpuActivity];
  san.counts[kDeviceBlocks] = cupti.counts[kActivityBlocks];
  san.counts[kDeviceGridBlocks] = cupti.counts[kActivityBlocks];
  b = compare_blocks(cupti, san);
  EXPECT_FALSE(b.contains("why")) << b.dump();
  EXPECT_TRUE(b["kernels_differing"].empty());
  EXPECT_EQ(row(command_verdict({cupti, san}), "sanitizer", "device")["status"], "complete");
  // Every launch seen, fewer blocks than they asked for: partial, with the reason.
  san.counts[kDeviceBlocks]["k1"] = 199;
  const json short_row = row(command_verdict({cupti, san}), "sanitizer", "device");
  EXPECT_EQ(short_row["status"], "partial") << short_row.dump();
  EXPECT_NE(short_row["why"].get<std::string>().find("fewer blocks counted"), std::string::npos) << short_row.dump();
}

// The console's end of run leaves the verdict per layer out; details.txt beside summary.json
// holds it in plain text, with the program's strings unable to drive a terminal.
TEST(Verdict, DetailsFileHoldsTheVerdictEscaped) {
  const auto root = std::filesystem::temp_directory_path() / ("details-test." + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  MethodView cupti = view("cupti", {"driver"}, {"driver"}, {ev("driver", "cuLaunchKernel"), ev("driver", "cuMemAlloc")});
  MethodView preload = view("preload", {"driver"}, {"driver"}, {ev("driver", "cuLaunchKernel")});
  preload.partly_unobserved["driver"] = "a reason from outside \x1b[2J\x1b]0;PWNED\x07";
  const json summary = {{"verdict", command_verdict({cupti, preload})}};
  write_details(root, summary, nullptr);
  std::ifstream f(root / kDetailsFile);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("matched 1 of the reference's 2"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("a reason from outside \\x1B[2J"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find('\x1b'), std::string::npos) << "an escape byte reached the file";
  // Nothing to say: no file.
  std::filesystem::remove(root / kDetailsFile);
  write_details(root, json::object(), nullptr);
  EXPECT_FALSE(std::filesystem::exists(root / kDetailsFile));
  std::filesystem::remove_all(root);
}
