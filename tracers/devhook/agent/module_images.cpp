// A module's code as the agent gets it, read and rewritten: the PTX a fatbin holds for the
// context's GPU, or the image a program hands the driver API (PTX text, a fatbin; a cubin
// has no PTX to rewrite).
#include <cstring>
#include <stdexcept>
#include <string>

#include "tracers/devhook/agent/agent_state.h"
#include "tracers/devhook/agent/driver_api.h"
#include "tracers/devhook/fatbin.h"
#include "tracers/devhook/ptx_rewrite.h"

namespace cudatrace::devhook {

namespace {

// Rewrites PTX text into fb.
void rewrite_into(FatbinState& fb, const std::string& ptx, ProbeMode mode) {
  RewrittenPtx r = rewrite_ptx(ptx, mode, agent().subrings);
  fb.ptx = std::move(r.ptx);
  fb.kernels = std::move(r.kernels);
}

// PTX a program hands the driver is a NUL-terminated string; past this, it is not PTX.
constexpr size_t kMaxPtxBytes = size_t(256) << 20;

// The compute capability of the current context's device, or 0.
int current_arch() {
  const DriverApi& d = driver();
  CUdevice dev;
  int major = 0, minor = 0;
  if (!d.loaded || d.ctx_get_device(&dev) != CUDA_SUCCESS ||
      d.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
      d.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS)
    return 0;
  return major * 10 + minor;
}

}  // namespace

void prepare_fatbin(FatbinState& fb, const void* image, int arch, ProbeMode mode) {
  fb.prepared = true;
  try {
    const Fatbin f = parse_fatbin(image);
    std::string why;
    const FatbinEntry* e = pick_ptx(f, uint32_t(arch), why);
    if (!e) {
      fb.error = why;
      return;
    }
    fb.source = "compute_" + std::to_string(e->arch) + (e->compression == Compression::kZstd ? ", zstd" : ", plain");
    rewrite_into(fb, ptx_text(*e), mode);
  } catch (const std::exception& ex) {
    fb.error = ex.what();
  }
}

FatbinState prepare_image(const void* image, const char* via, ProbeMode mode) {
  FatbinState fb;
  fb.via = via;
  fb.prepared = true;
  const auto* bytes = static_cast<const unsigned char*>(image);
  uint32_t magic = 0;
  if (image) std::memcpy(&magic, image, sizeof magic);
  if (!image) {
    fb.error = "no image";
  } else if (std::memcmp(bytes, "\x7f" "ELF", 4) == 0) {
    fb.error = "a cubin: machine code only, no PTX to rewrite";
  } else if (magic == kWrapperMagic || magic == kFatbinMagic) {
    if (const int arch = current_arch(); arch <= 0)
      fb.error = "a fatbin loaded with no GPU architecture known (no current context)";
    else
      prepare_fatbin(fb, image, arch, mode);
  } else {
    const size_t n = strnlen(static_cast<const char*>(image), kMaxPtxBytes);
    try {
      if (n == kMaxPtxBytes) throw std::runtime_error("not a cubin, fatbin or PTX text the agent can read");
      fb.source = "PTX text";
      rewrite_into(fb, std::string(static_cast<const char*>(image), n), mode);
    } catch (const std::exception& ex) {
      fb.error = ex.what();
    }
  }
  return fb;
}

}  // namespace cudatrace::devhook
