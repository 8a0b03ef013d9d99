#pragma once
// Names for the NVIDIA driver's ioctls, from the request code and the device node.
// /dev/nvidiactl and /dev/nvidia<N> take _IOC-encoded requests of type 'F' whose number
// is an RM escape (nv_escape.h) or NV_IOCTL_BASE (200) + n (nv-ioctl-numbers.h);
// /dev/nvidia-uvm takes plain command numbers (uvm_ioctl.h, uvm_linux_ioctl.h).
#include <cstdint>
#include <string>

namespace cudatrace {

// "NV_ESC_RM_CONTROL", "UVM_INITIALIZE", ... or "" when the code is not known.
// `device` is the path strace printed for the fd (may be empty).
std::string nvidia_ioctl_name(const std::string& device, uint64_t request);

bool is_nvidia_device(const std::string& path);

}  // namespace cudatrace
