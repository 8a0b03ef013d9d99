// Kernels of the shapes the devhook rewriter must handle, compiled into fatbins at build
// time (zstd-compressed, as nvcc 13 does by default, and plain) for the unit tests.
struct Big {
  double v[4];
};

extern "C" __global__ void vecadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void no_params() {}

// A struct passed by value: one parameter, declared as an aligned byte array in PTX.
extern "C" __global__ void by_value(Big b, double* out) { *out = b.v[0] + b.v[3]; }

extern "C" __global__ void grid3d(unsigned* out) { atomicAdd(out, blockIdx.z + threadIdx.y); }

// Several ways out of one kernel.
extern "C" __global__ void early_exits(int* out, int n) {
  if (threadIdx.x >= n) return;
  if (out[threadIdx.x] < 0) {
    out[threadIdx.x] = 0;
    return;
  }
  for (int i = 0; i < n; ++i) {
    if (out[i] == 7) asm volatile("exit;");
    out[i] += i;
  }
}

// A C++ kernel: its PTX name is mangled.
template <class T>
__global__ void scale(T* p, T f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= f;
}
template __global__ void scale<float>(float*, float, int);
