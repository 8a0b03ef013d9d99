// Reading an eBPF spool back (tracers/ebpf/ring_spool.h) without a BPF map: a spool cut by a
// failed write gives back what it holds, and every record it accepted but did not give back
// is loss, with the write's error failing the run.
#include <gtest/gtest.h>

#include "common/zstd_file.h"
#include "test_support.h"
#include "tracers/ebpf/ring_spool.h"

using namespace cudatrace;
namespace fs = std::filesystem;

namespace {
struct Rec {
  uint64_t i, pad[20];
};
}  // namespace

TEST(RingSpool, ACutSpoolKeepsItsPrefixAndCountsTheRestAsLoss) {
  const fs::path dir = testsupport::temp_dir("spool-cut");
  const uint64_t accepted = 40000;
  {
    ZstdFileWriter w(dir / "s.zst");
    for (uint64_t i = 0; i < accepted; ++i) {
      Rec r{i, {}};
      r.pad[i % 20] = i * 2654435761u;  // not all zeros: several blocks
      w.write(&r, sizeof r);
    }
    w.close();
  }
  fs::resize_file(dir / "s.zst", fs::file_size(dir / "s.zst") / 2);
  std::string cut;
  uint64_t next = 0;
  bool in_order = true;
  const uint64_t read = for_each_spooled<Rec>(dir / "s.zst", [&](const Rec& r) { in_order = in_order && r.i == next++; }, cut);
  EXPECT_TRUE(in_order);
  EXPECT_GT(read, 0u) << "the prefix before the cut is read";
  EXPECT_LT(read, accepted);
  EXPECT_FALSE(cut.empty());

  TracerReport report;
  report.loss = {{"records_the_disk_refused", 7}};
  account_spool(report, accepted, read, "cannot write s.zst: No space left on device", cut);
  EXPECT_EQ(report.loss["records_the_disk_refused"].get<uint64_t>(), 7 + accepted - read) << report.loss.dump();
  EXPECT_EQ(report.error, "the spool: cannot write s.zst: No space left on device");
  EXPECT_EQ(report.notes["spool_cut"], cut);

  // A whole spool: nothing added, no error, no note.
  TracerReport whole;
  whole.loss = {{"records_the_disk_refused", 0}};
  account_spool(whole, 10, 10, "", "");
  EXPECT_EQ(whole.loss["records_the_disk_refused"].get<uint64_t>(), 0u);
  EXPECT_TRUE(whole.error.empty());
  EXPECT_FALSE(whole.notes.contains("spool_cut"));
}
