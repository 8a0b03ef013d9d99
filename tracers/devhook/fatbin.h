#pragma once
// Reading the fat binaries nvcc embeds in a program: the container cudart is handed by
// __cudaRegisterFatBinary, its entries (PTX or machine code, per architecture), and the
// PTX text, which nvcc 13 compresses with zstd unless told --no-compress.
//
// Layout (little-endian), as nvcc 13 writes it and cuobjdump reads it:
//   wrapper  {u32 magic 0x466243b1, u32 version, u64 data*, u64 unused}
//   header   {u32 magic 0xba55ed50, u16 version, u16 header size, u64 size of what follows}
//   entries  {u16 kind (1 PTX, 2 ELF), u16, u32 entry header size, u64 padded payload size,
//             u32 compressed size, u32, u16 minor, u16 major, u32 arch, u32 name offset,
//             u32 name size, u64 flags, u64, u64 uncompressed size, ...} then the payload.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cudatrace::devhook {

struct FatbinError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class EntryKind { kPtx, kElf, kOther };
enum class Compression { kNone, kZstd, kLz4 };

struct FatbinEntry {
  EntryKind kind = EntryKind::kOther;
  uint32_t arch = 0;           // e.g. 90 for sm_90 / compute_90
  uint32_t version_major = 0;  // PTX ISA version for PTX entries
  uint32_t version_minor = 0;
  uint64_t flags = 0;
  Compression compression = Compression::kNone;
  const uint8_t* payload = nullptr;  // inside the container
  uint64_t payload_size = 0;         // bytes stored (compressed or not)
  uint64_t uncompressed_size = 0;    // 0 when stored plain
};

struct Fatbin {
  std::vector<FatbinEntry> entries;
  size_t size = 0;  // bytes of the container, header included
};

inline constexpr uint32_t kWrapperMagic = 0x466243b1;
inline constexpr uint32_t kFatbinMagic = 0xba55ed50;

// Parses the container at `data`, which starts with either the wrapper cudart receives or
// the fatbin header itself. `limit` bounds the read when known (a file); 0 trusts the
// header's size (memory inside a loaded program). Throws FatbinError on anything malformed.
Fatbin parse_fatbin(const void* data, size_t limit = 0);

// The entry's PTX text, decompressed. Throws FatbinError for a non-PTX entry, an LZ4 one
// (older toolkits; not supported), or a payload that does not decompress.
std::string ptx_text(const FatbinEntry& e);

// The PTX entry to instrument for a GPU of compute capability `arch` (e.g. 90): the newest
// PTX not newer than the GPU. nullptr when there is none; `why` says what there was.
const FatbinEntry* pick_ptx(const Fatbin& f, uint32_t arch, std::string& why);

}  // namespace cudatrace::devhook
