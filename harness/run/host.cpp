#include "harness/run/host.h"

#include "common/spawn.h"
#include "harness/git_revision.h"

#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace cudatrace {

namespace {

// The few driver entry points the probe needs, looked up by hand: linking libcuda would
// make the harness unable to start on a machine without a driver.
struct Driver {
  void* handle = nullptr;
  int (*cuInit)(unsigned) = nullptr;
  int (*cuDriverGetVersion)(int*) = nullptr;
  int (*cuDeviceGetCount)(int*) = nullptr;
  int (*cuDeviceGet)(int*, int) = nullptr;
  int (*cuDeviceGetName)(char*, int, int) = nullptr;
  int (*cuDeviceGetAttribute)(int*, int, int) = nullptr;
  int (*cuDeviceTotalMem)(size_t*, int) = nullptr;
  int (*cuGetErrorName)(int, const char**) = nullptr;
  int (*cuDeviceGetPCIBusId)(char*, int, int) = nullptr;
  int (*cuDeviceGetUuid)(unsigned char*, int) = nullptr;  // CUuuid: 16 bytes
  std::string error;

  Driver() {
    handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = dlerror();
      error = std::string("no NVIDIA driver (") + (e ? e : "libcuda.so.1 not loadable") + ")";
      return;
    }
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(handle, name)); };
    sym(cuInit, "cuInit");
    sym(cuDriverGetVersion, "cuDriverGetVersion");
    sym(cuDeviceGetCount, "cuDeviceGetCount");
    sym(cuDeviceGet, "cuDeviceGet");
    sym(cuDeviceGetName, "cuDeviceGetName");
    sym(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    sym(cuDeviceTotalMem, "cuDeviceTotalMem_v2");
    sym(cuGetErrorName, "cuGetErrorName");
    sym(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId");
    sym(cuDeviceGetUuid, "cuDeviceGetUuid_v2");
    if (!cuDeviceGetUuid) sym(cuDeviceGetUuid, "cuDeviceGetUuid");
    if (!cuInit || !cuDeviceGetCount || !cuDriverGetVersion) error = "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
  }
  std::string name_of(int code) const {
    const char* n = nullptr;
    if (cuGetErrorName && cuGetErrorName(code, &n) == 0 && n) return std::string(n) + " (" + std::to_string(code) + ")";
    return "CUDA driver error " + std::to_string(code);
  }
};

const Driver& driver() {
  static Driver d;
  return d;
}

// Result of cuInit + device count, computed once.
struct GpuState {
  bool ok = false;
  std::string reason;
  int count = 0;
};

const GpuState& gpu_state() {
  static GpuState s = [] {
    GpuState g;
    const Driver& d = driver();
    if (!d.error.empty()) {
      g.reason = d.error;
      return g;
    }
    if (int r = d.cuInit(0); r != 0) {
      g.reason = "cuInit failed: " + d.name_of(r);
      return g;
    }
    if (int r = d.cuDeviceGetCount(&g.count); r != 0) {
      g.reason = "cuDeviceGetCount failed: " + d.name_of(r);
      return g;
    }
    if (g.count < 1) {
      g.reason = "the driver reports no CUDA device";
      return g;
    }
    g.ok = true;
    return g;
  }();
  return s;
}

bool has_bpf_caps() {
  // CAP_PERFMON = 38, CAP_BPF = 39 in the effective set.
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) == 0) {
      unsigned long long caps = std::stoull(line.substr(7), nullptr, 16);
      return (caps >> 38 & 1) && (caps >> 39 & 1);
    }
  }
  return false;
}

// The first non-empty line the program prints.
std::string first_line_of(const std::vector<std::string>& argv) {
  std::string out = spawn_and_wait(argv, true, 4096).output;
  out.erase(0, out.find_first_not_of("\r\n"));
  out = out.substr(0, out.find('\n'));
  while (!out.empty() && out.back() == '\r') out.pop_back();
  return out;
}

// How a tool prints its version: `-V` (strace, bpftrace); nvidia-smi has no `-V`.
const char* version_flag(const std::string& tool) { return tool == "nvidia-smi" || tool == "nsys" ? "--version" : "-V"; }

std::string os_release() {
  std::ifstream f("/etc/os-release");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  return "unknown";
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// Each device's bus id and UUID, as the driver gives them to this process.
std::map<int, HostDevice> host_devices() {
  std::map<int, HostDevice> out;
  const Driver& d = driver();
  for (int i = 0; i < gpu_state().count; ++i) {
    int dev = 0;
    if (!d.cuDeviceGet || d.cuDeviceGet(&dev, i) != 0) continue;
    HostDevice h;
    h.ordinal = i;
    char text[256] = {};
    if (d.cuDeviceGetPCIBusId && d.cuDeviceGetPCIBusId(text, sizeof text - 1, dev) == 0)
      h.pci_bus_id = normalize_pci_bus_id(text);
    unsigned char uuid[16] = {};
    if (d.cuDeviceGetUuid && d.cuDeviceGetUuid(uuid, dev) == 0) {
      static const int dashes_after[] = {4, 6, 8, 10};  // GPU-8-4-4-4-12, as nvidia-smi writes it
      h.uuid = "GPU-";
      for (int b = 0; b < 16; ++b) {
        for (int a : dashes_after)
          if (b == a) h.uuid += '-';
        char hex[3];
        std::snprintf(hex, sizeof hex, "%02x", uuid[b]);
        h.uuid += hex;
      }
    }
    if (d.cuDeviceGetName && d.cuDeviceGetName(text, sizeof text - 1, dev) == 0) h.name = text;
    out[i] = h;
  }
  return out;
}

}  // namespace

std::filesystem::path self_prefix() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::current_path() : exe.parent_path().parent_path();
}

HostFacts probe_host(const std::filesystem::path& prefix) {
  HostFacts h;
  h.prefix = prefix;
  h.root = geteuid() == 0 || has_bpf_caps();
  const GpuState& g = gpu_state();
  h.gpu = g.ok;
  h.gpu_reason = g.reason;
  h.libcuda = driver().handle != nullptr;
  if (g.ok) {
    h.gpu_count = g.count;
    h.devices = host_devices();
  }
  return h;
}

nlohmann::json environment_manifest(const HostFacts& host, const std::vector<std::string>& methods) {
  nlohmann::json gpu = {{"available", host.gpu}};
  const Driver& d = driver();
  if (!host.gpu) gpu["reason"] = host.gpu_reason;
  if (d.error.empty() && d.cuDriverGetVersion) {
    int v = 0;
    if (d.cuDriverGetVersion(&v) == 0) gpu["driver_cuda_version"] = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  }
  std::ifstream nv("/sys/module/nvidia/version");
  std::string driver_version;
  if (nv && std::getline(nv, driver_version)) gpu["driver_version"] = driver_version;
  if (host.gpu) {
    nlohmann::json devices = nlohmann::json::array();
    for (int i = 0; i < gpu_state().count; ++i) {
      int dev = 0;
      if (d.cuDeviceGet(&dev, i) != 0) continue;
      char name[256] = {};
      d.cuDeviceGetName(name, sizeof name, dev);
      int major = 0, minor = 0, sms = 0;
      d.cuDeviceGetAttribute(&major, 75, dev);  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
      d.cuDeviceGetAttribute(&minor, 76, dev);  // ..._MINOR
      d.cuDeviceGetAttribute(&sms, 16, dev);    // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
      size_t mem = 0;
      if (d.cuDeviceTotalMem) d.cuDeviceTotalMem(&mem, dev);
      const auto known = host.devices.find(i);
      devices.push_back({{"index", i},
                         {"name", name},
                         {"pci_bus_id", known != host.devices.end() ? known->second.pci_bus_id : ""},
                         {"uuid", known != host.devices.end() ? known->second.uuid : ""},
                         {"compute_capability", std::to_string(major) + "." + std::to_string(minor)},
                         {"multiprocessors", sms},
                         {"memory_bytes", mem}});
    }
    gpu["devices"] = devices;
  }

  utsname u{};
  uname(&u);
  // Only the tools this run uses are run (for their version): a root process starts no
  // program it does not need.
  std::vector<std::string> used;
  if (host.gpu) used.push_back("nvidia-smi");
  for (const auto& name : methods)
    if (const Method* m = find_method(name))
      for (const auto& t : m->tools) used.push_back(t);
  nlohmann::json tools = nlohmann::json::object();
  for (const std::string& tool : used) {
    if (tools.contains(tool)) continue;
    auto path = find_on_path(tool);
    tools[tool] = path.empty() ? nlohmann::json(nullptr)
                               : nlohmann::json{{"path", path.string()},
                                                {"version", first_line_of({path.string(), version_flag(tool)})}};
  }
  char hostname[256] = {};
  gethostname(hostname, sizeof hostname - 1);
  return {{"gpu", gpu},
          {"cuda",
           {{"toolkit_version_at_build", CUDATRACE_CUDA_VERSION},
            {"toolkit_library_dir_at_build", CUDATRACE_CUDA_LIBDIR},
            {"cuda_visible_devices", getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : ""}}},
          {"host",
           {{"hostname", hostname},
            {"kernel", std::string(u.release)},
            {"arch", std::string(u.machine)},
            {"os", os_release()},
            {"cpu", cpu_model()},
            {"cpus", sysconf(_SC_NPROCESSORS_ONLN)},
            {"root_or_bpf_caps", host.root}}},
          {"tools", tools},
          {"harness", {{"version", CUDATRACE_VERSION}, {"revision", CUDATRACE_GIT_REV}, {"prefix", host.prefix.string()}}}};
}

}  // namespace cudatrace
