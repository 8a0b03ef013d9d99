// The harness's own zstd files (sort scratch, eBPF spools): what is written comes back byte
// for byte across batches; a cut file is an error, never a short read taken for the end;
// the file is made exclusively, never through a link.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "common/zstd_file.h"
#include "test_support.h"

using namespace cudatrace;
namespace fs = std::filesystem;

namespace {
std::string record(uint64_t i) {
  std::string r(48, '\0');
  for (size_t b = 0; b < 8; ++b) r[b] = char(i >> (8 * b));
  r[20] = char(i % 7);
  return r;
}
}  // namespace

TEST(ZstdFile, RecordsComeBackWholeAcrossBatches) {
  const fs::path dir = testsupport::temp_dir("zstd-file");
  const uint64_t n = 3 * ZstdFileWriter::kBatch / 48 + 17;  // three batches and a tail
  {
    ZstdFileWriter w(dir / "f.zst");
    for (uint64_t i = 0; i < n; ++i) w.write(record(i));
    w.close();
    EXPECT_GT(w.bytes_out(), 0u);
    EXPECT_LT(w.bytes_out(), n * 48 / 4) << "records this regular compress";
  }
  ZstdFileReader r(dir / "f.zst");
  std::string_view got;
  uint64_t i = 0;
  while (r.take(48, got)) {
    ASSERT_EQ(got, record(i)) << "record " << i;
    ++i;
  }
  EXPECT_EQ(i, n);
  EXPECT_FALSE(r.take(48, got));
}

TEST(ZstdFile, ACutFileIsAnErrorNotTheEnd) {
  const fs::path dir = testsupport::temp_dir("zstd-cut");
  {
    ZstdFileWriter w(dir / "f.zst");
    for (uint64_t i = 0; i < 100000; ++i) w.write(record(i * 2654435761u));
    w.close();
  }
  const auto size = fs::file_size(dir / "f.zst");
  fs::resize_file(dir / "f.zst", size / 2);
  ZstdFileReader r(dir / "f.zst");
  std::string_view got;
  EXPECT_THROW(
      {
        while (r.take(48, got)) {
        }
      },
      std::runtime_error);
}

TEST(ZstdFile, MadeExclusivelyNeverThroughALink) {
  const fs::path dir = testsupport::temp_dir("zstd-excl");
  std::ofstream(dir / "there") << "x";
  EXPECT_THROW(ZstdFileWriter(dir / "there"), std::runtime_error);
  ASSERT_EQ(symlink((dir / "elsewhere").c_str(), (dir / "link").c_str()), 0);
  EXPECT_THROW(ZstdFileWriter(dir / "link"), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir / "elsewhere"));
  EXPECT_THROW(ZstdFileReader(dir / "link"), std::runtime_error);
}

// A last read of compressed bytes can inflate to many output buffers: the reader drains
// what zstd still holds before it takes the end of the input for the end of the stream.
TEST(ZstdFile, AFewCompressedBytesThatInflateFarComeBackWhole) {
  const fs::path dir = testsupport::temp_dir("zstd-far");
  const std::string zeros(size_t(8) << 20, '\0');
  {
    ZstdFileWriter w(dir / "f.zst");
    w.write(zeros);
    w.close();
  }
  ASSERT_LT(fs::file_size(dir / "f.zst"), size_t(64) << 10) << "one read of the input holds it all";
  ZstdFileReader r(dir / "f.zst");
  std::string_view got;
  size_t bytes = 0;
  while (r.take(4096, got)) bytes += got.size();
  EXPECT_EQ(bytes, zeros.size());
}
