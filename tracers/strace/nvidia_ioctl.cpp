#include "tracers/strace/nvidia_ioctl.h"

#include <map>

namespace cudatrace {

namespace {

const std::map<uint32_t, const char*>& rm_escapes() {
  static const std::map<uint32_t, const char*> m{
      {0x27, "NV_ESC_RM_ALLOC_MEMORY"},      {0x28, "NV_ESC_RM_ALLOC_OBJECT"},
      {0x29, "NV_ESC_RM_FREE"},              {0x2a, "NV_ESC_RM_CONTROL"},
      {0x2b, "NV_ESC_RM_ALLOC"},             {0x32, "NV_ESC_RM_CONFIG_GET"},
      {0x33, "NV_ESC_RM_CONFIG_SET"},        {0x34, "NV_ESC_RM_DUP_OBJECT"},
      {0x35, "NV_ESC_RM_SHARE"},             {0x37, "NV_ESC_RM_CONFIG_GET_EX"},
      {0x38, "NV_ESC_RM_CONFIG_SET_EX"},     {0x39, "NV_ESC_RM_I2C_ACCESS"},
      {0x41, "NV_ESC_RM_IDLE_CHANNELS"},     {0x4a, "NV_ESC_RM_VID_HEAP_CONTROL"},
      {0x4d, "NV_ESC_RM_ACCESS_REGISTRY"},   {0x4e, "NV_ESC_RM_MAP_MEMORY"},
      {0x4f, "NV_ESC_RM_UNMAP_MEMORY"},      {0x52, "NV_ESC_RM_GET_EVENT_DATA"},
      {0x54, "NV_ESC_RM_ALLOC_CONTEXT_DMA2"}, {0x56, "NV_ESC_RM_ADD_VBLANK_CALLBACK"},
      {0x57, "NV_ESC_RM_MAP_MEMORY_DMA"},    {0x58, "NV_ESC_RM_UNMAP_MEMORY_DMA"},
      // NV_IOCTL_BASE (200) + n
      {200, "NV_ESC_CARD_INFO"},             {201, "NV_ESC_REGISTER_FD"},
      {206, "NV_ESC_ALLOC_OS_EVENT"},        {207, "NV_ESC_FREE_OS_EVENT"},
      {209, "NV_ESC_STATUS_CODE"},           {210, "NV_ESC_CHECK_VERSION_STR"},
      {211, "NV_ESC_IOCTL_XFER_CMD"},        {212, "NV_ESC_ATTACH_GPUS_TO_FD"},
      {213, "NV_ESC_QUERY_DEVICE_INTR"},     {214, "NV_ESC_SYS_PARAMS"},
      {215, "NV_ESC_EXPORT_TO_DMABUF_FD"},   {218, "NV_ESC_WAIT_OPEN_COMPLETE"},
  };
  return m;
}

const std::map<uint64_t, const char*>& uvm_commands() {
  static const std::map<uint64_t, const char*> m{
      {0x30000001, "UVM_INITIALIZE"},   {0x30000002, "UVM_DEINITIALIZE"},
      {23, "UVM_CREATE_RANGE_GROUP"},   {24, "UVM_DESTROY_RANGE_GROUP"},
      {37, "UVM_REGISTER_GPU"},         {38, "UVM_UNREGISTER_GPU"},
      {39, "UVM_PAGEABLE_MEM_ACCESS"},
  };
  return m;
}

}  // namespace

bool is_nvidia_device(const std::string& path) { return path.rfind("/dev/nvidia", 0) == 0; }

std::string nvidia_ioctl_name(const std::string& device, uint64_t request) {
  if (device.rfind("/dev/nvidia-uvm", 0) == 0) {
    auto it = uvm_commands().find(request);
    return it != uvm_commands().end() ? it->second : "";
  }
  // _IOC layout: nr bits 0-7, type bits 8-15.
  const uint32_t type = (request >> 8) & 0xff, nr = request & 0xff;
  if (type != 'F' || (!device.empty() && !is_nvidia_device(device))) return "";
  auto it = rm_escapes().find(nr);
  return it != rm_escapes().end() ? it->second : "";
}

}  // namespace cudatrace
