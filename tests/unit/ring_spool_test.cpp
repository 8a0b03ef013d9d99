// Reading an eBPF spool back (tracers/ebpf/ring_spool.h) without a BPF map: a spool cut by a
// failed write gives back what it holds, and every record it accepted but did not give back
// is loss, with the write's error failing the run. And read while it is written
// (tracers/ebpf/spool_follower.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/zstd_file.h"
#include "test_support.h"
#include "tracers/ebpf/ring_spool.h"
#include "tracers/ebpf/spool_follower.h"

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

// The spool read while it is written (spool_follower.h): every record, in order, including
// the batch the writer compresses only when it closes; and the decoder's failure is the
// run's, not a cut.
TEST(SpoolFollower, ReadsEveryRecordWhileTheSpoolIsWrittenThenTheTailAtTheClose) {
  const fs::path dir = testsupport::temp_dir("spool-follow");
  const uint64_t total = 30000;  // several of the writer's batches, and a part-full last one
  ZstdFileWriter w(dir / "s.zst");
  uint64_t next = 0;
  bool in_order = true;
  std::atomic<uint64_t> seen_while_writing{0};
  SpoolFollower f(dir / "s.zst", sizeof(Rec), [&](std::string_view bytes) {
    Rec r;
    std::memcpy(&r, bytes.data(), sizeof r);
    in_order = in_order && r.i == next++;
  });
  for (uint64_t i = 0; i < total; ++i) {
    Rec r{i, {}};
    r.pad[i % 20] = i * 2654435761u;
    w.write(&r, sizeof r);
    if (i == total - 1000) {  // the writer is still open: what it compressed so far is read
      for (int wait = 0; wait < 2000 && f.read() == 0; ++wait) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      seen_while_writing = f.read();
    }
  }
  w.close();
  f.finish();
  EXPECT_GT(seen_while_writing.load(), 0u) << "records are decoded before the writer closes";
  EXPECT_EQ(f.read(), total);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(f.cut(), "");
}

TEST(SpoolFollower, WhatTheDecoderThrowsIsThrownAtFinishNotTakenForACut) {
  const fs::path dir = testsupport::temp_dir("spool-follow-throw");
  ZstdFileWriter w(dir / "s.zst");
  SpoolFollower f(dir / "s.zst", sizeof(Rec), [](std::string_view) { throw std::runtime_error("disk full"); });
  Rec r{1, {}};
  w.write(&r, sizeof r);
  w.close();
  EXPECT_THROW(
      try { f.finish(); } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "disk full");
        throw;
      },
      std::runtime_error);
  EXPECT_EQ(f.read(), 0u);
  EXPECT_EQ(f.cut(), "");
}
