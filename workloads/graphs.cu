// graphs: CUDA graphs, the way training loops and inference servers use them. A stream
// capture of three kernels and a copy is instantiated and replayed --replays times, and a
// second graph built node by node (cudaGraphAddKernelNode) is replayed --node_replays
// times. The launch calls happen once, at capture or build time; the kernels run at every
// replay, so the ledger records those executions too (what gpu-activity and device
// layers must see), not only the calls.
#include <vector>

#include "workloads/workload_main.h"

extern "C" __global__ void graph_inc(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

extern "C" __global__ void graph_accumulate(float* acc, const float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] += y[i];
}

int main(int argc, char** argv) {
  workload::Flags flags("graphs", "a captured graph and a node-by-node graph, each replayed many times, then checked.",
                        {{"n", {"elements per buffer", 1 << 16}},
                         {"replays", {"launches of the captured graph", 20}},
                         {"node_replays", {"launches of the node-by-node graph", 10}},
                         {"block", {"threads per block", 256}},
                         {"host_path", {workload::kHostPathHelp, 1}}});
  flags.parse(argc, argv);
  const int n = int(flags["n"]), block = int(flags["block"]);
  const int64_t replays = flags["replays"], node_replays = flags["node_replays"];
  workload::open_session("graphs", argc, argv);

  const size_t bytes = size_t(n) * sizeof(float);
  const int grid = (n + block - 1) / block;
  std::vector<float> zeros(n, 0.0f), acc(n), z(n);
  float *dx, *dy, *dacc, *dz;
  for (float** p : {&dx, &dy, &dacc, &dz}) {
    MUST(rt::Malloc(reinterpret_cast<void**>(p), bytes));
    MUST(rt::Memcpy(*p, zeros.data(), bytes, cudaMemcpyHostToDevice));
  }
  cudaStream_t s;
  MUST(rt::StreamCreate(&s));

  // Captured: x += 1 twice, y = x, acc += y. Per replay x grows by 2 and acc by x.
  cudaGraph_t captured;
  cudaGraphExec_t captured_exec;
  MUST(rt::StreamBeginCapture(s));
  rt::LaunchCaptured("graph_inc", graph_inc, grid, block, s, dx, n);
  rt::LaunchCaptured("graph_inc", graph_inc, grid, block, s, dx, n);
  MUST(rt::MemcpyAsync(dy, dx, bytes, cudaMemcpyDeviceToDevice, s));
  rt::LaunchCaptured("graph_accumulate", graph_accumulate, grid, block, s, dacc, static_cast<const float*>(dy), n);
  MUST(rt::StreamEndCapture(s, &captured));
  MUST(rt::GraphInstantiate(&captured_exec, captured));
  for (int64_t r = 0; r < replays; ++r) MUST(rt::GraphLaunch(captured_exec, s));
  const uint32_t g3[3] = {uint32_t(grid), 1, 1}, b3[3] = {uint32_t(block), 1, 1};
  ledger::executed("graph_inc", g3, b3, 2 * replays);
  ledger::executed("graph_accumulate", g3, b3, replays);

  // Node by node: two dependent graph_inc nodes on z.
  cudaGraph_t built;
  cudaGraphExec_t built_exec;
  cudaGraphNode_t first, second;
  MUST(rt::GraphCreate(&built));
  void* inc_args[] = {&dz, const_cast<int*>(&n)};
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(graph_inc);
  p.gridDim = dim3(grid);
  p.blockDim = dim3(block);
  p.kernelParams = inc_args;
  MUST(rt::GraphAddKernelNode(&first, built, nullptr, 0, &p, "graph_inc"));
  MUST(rt::GraphAddKernelNode(&second, built, &first, 1, &p, "graph_inc"));
  MUST(rt::GraphInstantiate(&built_exec, built));
  for (int64_t r = 0; r < node_replays; ++r) MUST(rt::GraphLaunch(built_exec, s));
  ledger::executed("graph_inc", g3, b3, 2 * node_replays);

  MUST(rt::StreamSynchronize(s));
  MUST(rt::Memcpy(acc.data(), dacc, bytes, cudaMemcpyDeviceToHost));
  MUST(rt::Memcpy(z.data(), dz, bytes, cudaMemcpyDeviceToHost));
  MUST(rt::GraphExecDestroy(captured_exec));
  MUST(rt::GraphExecDestroy(built_exec));
  MUST(rt::GraphDestroy(captured));
  MUST(rt::GraphDestroy(built));
  MUST(rt::StreamDestroy(s));
  for (float* p : {dx, dy, dacc, dz}) MUST(rt::Free(p));

  // After R replays acc = 2 + 4 + ... + 2R = R(R+1); z = 2 * node_replays.
  const float want_acc = float(replays * (replays + 1)), want_z = float(2 * node_replays);
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) ok = acc[i] == want_acc && z[i] == want_z;
  if (!ok) std::fprintf(stderr, "graphs: wrong result (acc %g, want %g; z %g, want %g)\n", acc[0], want_acc, z[0], want_z);

  ledger::intend("cudaMalloc", 4);
  ledger::intend("cudaMemcpy", 6);
  ledger::intend("cudaStreamCreate", 1);
  ledger::intend("cudaStreamBeginCapture", 1);
  ledger::intend("cudaLaunchKernel", 3);
  ledger::intend("cudaMemcpyAsync", 1);
  ledger::intend("cudaStreamEndCapture", 1);
  ledger::intend("cudaGraphInstantiate", 2);
  ledger::intend("cudaGraphLaunch", replays + node_replays);
  ledger::intend("cudaGraphCreate", 1);
  ledger::intend("cudaGraphAddKernelNode", 2);
  ledger::intend("cudaStreamSynchronize", 1);
  ledger::intend("cudaGraphExecDestroy", 2);
  ledger::intend("cudaGraphDestroy", 2);
  ledger::intend("cudaStreamDestroy", 1);
  ledger::intend("cudaFree", 4);
  ledger::info("grid", grid);
  ledger::info("block", block);
  return workload::close_session(ok);
}
