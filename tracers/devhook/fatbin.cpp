#include "tracers/devhook/fatbin.h"

#include <zstd.h>

#include <cstring>

namespace cudatrace::devhook {

namespace {

// Entry flags (observed in nvcc's output: 0x11 plain, 0x8011 zstd; LZ4 is CUDA 11-12's).
constexpr uint64_t kFlagLz4 = 0x2000;
constexpr uint64_t kFlagZstd = 0x8000;
constexpr size_t kHeaderSize = 16;
constexpr size_t kEntryBaseSize = 64;

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

Fatbin parse_fatbin(const void* data, size_t limit) {
  if (!data) throw FatbinError("no fatbin (null pointer)");
  const auto* p = static_cast<const uint8_t*>(data);
  if (limit && limit < 16) throw FatbinError("fatbin shorter than its header");
  if (load<uint32_t>(p) == kWrapperMagic) {
    p = load<const uint8_t*>(p + 8);
    limit = 0;  // the wrapper points elsewhere in memory: trust the header
    if (!p) throw FatbinError("fatbin wrapper with no data pointer");
  }
  if (load<uint32_t>(p) != kFatbinMagic)
    throw FatbinError("not a fatbin: magic " + std::to_string(load<uint32_t>(p)));
  const uint16_t header_size = load<uint16_t>(p + 6);
  const uint64_t body = load<uint64_t>(p + 8);
  if (header_size < kHeaderSize) throw FatbinError("fatbin header size " + std::to_string(header_size));
  Fatbin f;
  f.size = header_size + body;
  if (limit && f.size > limit)
    throw FatbinError("fatbin says " + std::to_string(f.size) + " bytes, only " + std::to_string(limit) + " there");
  const uint8_t* at = p + header_size;
  const uint8_t* end = p + f.size;
  while (at + kEntryBaseSize <= end) {
    const uint32_t entry_size = load<uint32_t>(at + 4);
    const uint64_t padded = load<uint64_t>(at + 8);
    if (entry_size < kEntryBaseSize || at + entry_size + padded > end)
      throw FatbinError("fatbin entry at offset " + std::to_string(at - p) + " runs past the container");
    FatbinEntry e;
    const uint16_t kind = load<uint16_t>(at);
    e.kind = kind == 1 ? EntryKind::kPtx : kind == 2 ? EntryKind::kElf : EntryKind::kOther;
    e.version_minor = load<uint16_t>(at + 24);
    e.version_major = load<uint16_t>(at + 26);
    e.arch = load<uint32_t>(at + 28);
    e.flags = load<uint64_t>(at + 40);
    e.compression = (e.flags & kFlagZstd) ? Compression::kZstd : (e.flags & kFlagLz4) ? Compression::kLz4 : Compression::kNone;
    e.payload = at + entry_size;
    const uint32_t compressed = load<uint32_t>(at + 16);
    e.payload_size = e.compression == Compression::kNone ? padded : compressed;
    e.uncompressed_size = e.compression == Compression::kNone ? 0 : load<uint64_t>(at + 56);
    if (e.payload_size > padded) throw FatbinError("fatbin entry's compressed size exceeds its payload");
    f.entries.push_back(e);
    at += entry_size + padded;
  }
  return f;
}

std::string ptx_text(const FatbinEntry& e) {
  if (e.kind != EntryKind::kPtx) throw FatbinError("entry is not PTX");
  std::string text;
  switch (e.compression) {
    case Compression::kNone:
      text.assign(reinterpret_cast<const char*>(e.payload), e.payload_size);
      break;
    case Compression::kLz4:
      throw FatbinError("PTX compressed with LZ4 (a pre-13 toolkit) is not supported; rebuild with --no-compress");
    case Compression::kZstd: {
      text.resize(e.uncompressed_size);
      const size_t n = ZSTD_decompress(text.data(), text.size(), e.payload, e.payload_size);
      if (ZSTD_isError(n)) throw FatbinError(std::string("zstd: ") + ZSTD_getErrorName(n));
      text.resize(n);
      break;
    }
  }
  // The payload is padded with NULs; the text ends at the first one.
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) text.resize(nul);
  return text;
}

const FatbinEntry* pick_ptx(const Fatbin& f, uint32_t arch, std::string& why) {
  const FatbinEntry* best = nullptr;
  std::string seen;
  for (const auto& e : f.entries) {
    if (e.kind != EntryKind::kPtx) {
      seen += (seen.empty() ? "" : ", ") + std::string(e.kind == EntryKind::kElf ? "sm_" : "?_") + std::to_string(e.arch);
      continue;
    }
    seen += (seen.empty() ? "" : ", ") + std::string("compute_") + std::to_string(e.arch);
    if (e.arch <= arch && (!best || e.arch > best->arch)) best = &e;
  }
  if (!best)
    why = "no PTX for compute_" + std::to_string(arch) + " or older in the fatbin (it has: " +
          (seen.empty() ? std::string("nothing") : seen) + ")";
  return best;
}

}  // namespace cudatrace::devhook
