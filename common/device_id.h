#pragma once
// A GPU's identity that every process of the host agrees on: its PCI bus id. Ordinals do
// not (CUDA_VISIBLE_DEVICES renumbers them per process), and the methods spell the bus id
// differently (the driver "0000:18:00.0", nvidia-smi "00000000:18:00.0", upper or lower
// case), so every id is compared in one form.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace cudatrace {

// "domain:bus:device.function" as lower-case hex, domain in four digits ("0000:18:00.0"),
// or empty when `text` is not of that shape (a method's bytes are outside text).
std::string normalize_pci_bus_id(const std::string& text);

// What the harness knows of the host's GPUs, by ordinal as a process that inherits the
// harness's environment numbers them: filled from the driver by probe_host.
struct HostDevice {
  int ordinal = -1;
  std::string pci_bus_id;  // normalized
  std::string uuid;        // "GPU-xxxxxxxx-...", empty when the driver did not say
  std::string name;
};

// uuid ("GPU-..." or the bare hex) -> normalized bus id, from `devices`; empty when unknown.
std::string bus_id_of_uuid(const std::map<int, HostDevice>& devices, const std::string& uuid);

}  // namespace cudatrace
