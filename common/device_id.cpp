#include "common/device_id.h"

#include <cctype>
#include <cstdio>

namespace cudatrace {

namespace {

// Reads hex digits from s[i..] up to `stop`; false when there are none, too many, or another character.
bool hex_field(const std::string& s, size_t& i, char stop, size_t max_digits, unsigned long& out) {
  out = 0;
  size_t digits = 0;
  while (i < s.size() && s[i] != stop) {
    const char c = char(std::tolower(static_cast<unsigned char>(s[i])));
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else return false;
    if (++digits > max_digits) return false;
    out = out * 16 + unsigned(v);
    ++i;
  }
  return digits > 0;
}

}  // namespace

std::string normalize_pci_bus_id(const std::string& text) {
  size_t i = 0;
  unsigned long domain = 0, bus = 0, dev = 0, fn = 0;
  // A domain of up to eight digits (nvidia-smi writes eight, the driver four), then the rest.
  if (!hex_field(text, i, ':', 8, domain) || i >= text.size()) return "";
  ++i;
  if (!hex_field(text, i, ':', 2, bus) || i >= text.size()) return "";
  ++i;
  if (!hex_field(text, i, '.', 2, dev) || i >= text.size()) return "";
  ++i;
  if (!hex_field(text, i, '\0', 1, fn) || i != text.size()) return "";
  if (domain > 0xffff || dev > 0x1f || fn > 7) return "";
  char out[24];
  std::snprintf(out, sizeof out, "%04lx:%02lx:%02lx.%lx", domain, bus, dev, fn);
  return out;
}

std::string bus_id_of_uuid(const std::map<int, HostDevice>& devices, const std::string& uuid) {
  auto bare = [](std::string u) {
    if (u.rfind("GPU-", 0) == 0) u = u.substr(4);
    std::string out;
    for (char c : u)
      if (std::isxdigit(static_cast<unsigned char>(c))) out += char(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string want = bare(uuid);
  if (want.empty()) return "";
  for (const auto& [ordinal, d] : devices)
    if (!d.uuid.empty() && bare(d.uuid) == want) return d.pci_bus_id;
  return "";
}

}  // namespace cudatrace
