#pragma once
// An EventReader whose decoding runs a little ahead on a thread of its own: the records of
// one file come to next() in file order, as from the reader itself, while the next few
// thousand are inflated and decoded beside. Decoding was about half of the work of the
// thread that reads the ledger and hands its calls to the pairing (perf, score_scale); with
// the pairing spread over its workers that thread sets the pace (docs/measured-history.md,
// "What was left after the program").
//
// With several decoders, a store written in frames (EventStoreWriter::end_frame_every: a
// workload's ledger) is cut into them (store_frames.h) and each frame inflated and decoded on
// whichever decoder takes it; the frames' records still go out in file order, each frame's
// timestamps made whole and `on_read` called as they go (in order, on the decoder whose turn
// it is). One decoder, about 175 ns a ledger record on the GPU host, set the pace of the
// scoring after a program of 10^8 calls (docs/measured-history.md).
//
// Memory stays bounded: at most `depth` batches of `batch` records wait, and each decoder
// holds at most a frame's worth (kHeld batches) before its turn. An error of the reader (a
// damaged record, a file past its bounds) reaches next() after the records read before it,
// as it would from EventReader.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/event.h"
#include "common/event_store.h"

namespace cudatrace {

class EventReadAhead {
 public:
  // `on_read`, where given, sees each record on the reading thread as it is read, before
  // next() hands it over: work of the reading's own (a check of the file) taken off the
  // caller's thread. It must not touch what the caller's thread does.
  using OnRead = std::function<void(const Event&, std::string_view packed_args)>;
  EventReadAhead(const std::filesystem::path& path, const StoreLimits& limits, OnRead on_read = nullptr,
                 size_t batch = 2048, size_t depth = 4, size_t decoders = 1);
  ~EventReadAhead();  // stops the reading thread, whatever was left unread
  EventReadAhead(const EventReadAhead&) = delete;
  EventReadAhead& operator=(const EventReadAhead&) = delete;

  // The next record, its args as the store holds them (EventReader::next(e, packed)), in
  // place in the batch it was decoded into: valid until the next call, nullptr at the end.
  // Not handed over by swapping: a swap wrote the caller's last record back into the batch,
  // half of the caller's time per record (perf, score_scale).
  const Event* next(std::string_view& packed_args);

  // Whether reading ahead is worth a thread on this machine: with fewer than 4 cores the
  // pairing's worker and the reader already take them.
  static bool worth_it();
  // Tests choose either way (CI has 2 cores, where reading ahead would never run); nullopt:
  // the machine decides again.
  static void force_worth_it(std::optional<bool> forced);
  // Decoders worth running on this machine: a quarter of its cores, 1 to 4 (the pairing's
  // workers take up to 8, and the thread that hands the calls to them one).
  static size_t decoders_worth_it();
  static void force_decoders(std::optional<size_t> forced);  // tests and score_scale; nullopt: the machine's
  static constexpr size_t kHeld = 8;  // batches a decoder holds before its turn

 private:
  struct Batch {
    std::vector<Event> events;
    std::vector<std::string> packed;
    size_t n = 0;
    bool last = false;         // the file ends after this batch
    std::exception_ptr error;  // thrown by the reader after this batch's records
  };
  void read(const std::filesystem::path& path, const StoreLimits& limits, const OnRead& on_read);
  // With several decoders: each takes the next frame and decodes it.
  void decode_frames(const std::filesystem::path& path, const StoreLimits& limits, const OnRead& on_read);
  struct Part;
  void decode_part(Part& part, std::vector<Batch>& held, const std::filesystem::path& path, const StoreLimits& limits,
                   const OnRead& on_read);
  bool wait_turn(uint64_t index);
  void stop_all();
  // What each decoder may hold, from the memory available: a frame's compressed bytes (past
  // them the rest is read as one stream) and the zstd window a frame may ask for (past it
  // the frame is an error, named): all decoders together at most a sixteenth of the memory.
  struct FrameMemory {
    size_t frame_bytes;
    int window_log;
    static FrameMemory for_machine(size_t decoders);
  };
  FrameMemory frame_memory_{};
  bool hand_out(Batch& b, const OnRead& on_read);  // false: nothing more goes out
  void pass_turn();

  std::vector<Batch> ring_;
  size_t batch_size_;
  std::mutex mu_;
  std::condition_variable filled_, emptied_;
  size_t head_ = 0, tail_ = 0;  // batches taken and filled (a count, modulo the ring)
  bool stop_ = false;
  size_t at_ = 0;  // next record of the batch at head_
  bool ready_ = false;  // the batch at head_ is filled
  bool done_ = false;
  std::vector<std::thread> threads_;
  // Several decoders: the frames, taken one at a time; whose turn it is to hand out; the
  // last timestamp handed out (a frame's records come relative to it); the bytes inflated.
  std::mutex split_mu_;
  std::unique_ptr<class StoreFrames> frames_;
  std::condition_variable turn_cv_;
  uint64_t turn_ = 0;
  int64_t base_ts_ = 0, part_base_ = 0;  // the last ts handed out; that before the part in turn
  bool over_ = false;  // the last batch is out (the end, or an error): nothing goes after it
  std::atomic<uint64_t> inflated_{0};  // what every part inflated so far, all decoders together
};

}  // namespace cudatrace
