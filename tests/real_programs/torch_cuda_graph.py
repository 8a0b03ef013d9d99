"""PyTorch: a forward pass (cuBLAS GEMMs and elementwise kernels) captured into a CUDA graph
and replayed many times, the pattern of CUDA-graph inference. Command for
`harness ... -- python3 tests/real_programs/torch_cuda_graph.py`."""
import torch

from cudatrace_program import step_done

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512)).cuda().eval()
static_in = torch.randn(64, 512, device="cuda")
with torch.no_grad():
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside the graph, as PyTorch asks
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(static_in)
    total = 0.0
    for i in range(50):
        static_in.copy_(torch.full_like(static_in, float(i) / 50))
        graph.replay()
        total += float(static_out.sum())  # waits for the replay: the step is over
        step_done()
    expected = model(static_in)
torch.cuda.synchronize()
assert torch.allclose(static_out, expected, atol=1e-4), "graph replay differs from eager"
print(f"graph replays ok, checksum {total:.3f}")
