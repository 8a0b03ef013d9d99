// A libcudart for the preload shim's device tests, over fake_libcuda. Like the real one it
// calls the driver for the work (through libcuda's exports, so the shim's driver hooks see
// those calls), and makes contexts current where the shim cannot see it: a thread's first
// call makes device 0's primary context current, cudaSetDevice makes its device's current.
extern "C" {
int cuEventRecord(void*, void*);
int cuStreamSynchronize(void*);
void fake_make_current(int device);
int fake_current_device();

static void primary_context_if_none() {
  if (fake_current_device() < 0) fake_make_current(0);
}

int cudaSetDevice(int device) {
  if (device < 0 || device >= 4) return 101;  // cudaErrorInvalidDevice
  fake_make_current(device);
  return 0;
}

int cudaGetDevice(int* device) {
  primary_context_if_none();
  *device = fake_current_device();
  return 0;
}

int cudaEventRecord(void* event, void* stream) {
  primary_context_if_none();
  return cuEventRecord(event, stream) == 0 ? 0 : 400;  // cudaErrorInvalidResourceHandle
}

int cudaStreamSynchronize(void* stream) {
  primary_context_if_none();
  return cuStreamSynchronize(stream) == 0 ? 0 : 400;
}
}
