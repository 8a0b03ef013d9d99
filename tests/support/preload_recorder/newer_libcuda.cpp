// A stand-in for a driver newer than the shim's toolkit: a libcuda.so.1 that exports one
// function the toolkit's stub does not (cuFutureCall) besides one it does (cuInit).
extern "C" int cuInit(unsigned) { return 0; }
extern "C" int cuFutureCall(int x) { return x + 1; }
