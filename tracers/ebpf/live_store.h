#pragma once
// A method's spool decoded into the run's store while the program runs: the store, the
// method's decoder writing to it, and the follower (spool_follower.h) that hands the decoder
// each record as the drain writes it. Declared in the order they are built, so the
// follower, last, is stopped first. cupti and uprobe keep one each.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "common/event_store.h"
#include "tracers/ebpf/spool_follower.h"

namespace cudatrace {

template <class Record, class Decoder, class Stats>
class LiveStore {
 public:
  using WholeSink = std::function<void(Event&&)>;
  using CallSink = std::function<void(const Event&, const PackedArgs&)>;
  // `make(stats, whole, calls)` builds the decoder: its counts go to `stats`, events whole
  // to `whole` and calls with packed args to `calls`, both into the store.
  template <class Make>
  LiveStore(const std::filesystem::path& run_dir, const std::filesystem::path& spool, Make make)
      : out_(run_dir / kEventsFile),
        decoder_(make(stats_, [this](Event&& e) { out_.write(e); },
                      [this](const Event& e, const PackedArgs& args) { out_.write(e, args); })),
        follower_(spool, sizeof(Record), [this](std::string_view bytes) {
          Record r;
          std::memcpy(&r, bytes.data(), sizeof r);
          decoder_.add(r);
        }) {}

  struct Ended {
    Stats stats;
    uint64_t read = 0;  // records decoded
    std::string cut;    // why the spool ended early, else ""
  };
  // The drain has closed the spool: decodes the rest, lets the decoder settle what waits,
  // closes the store. What the decoder or the store threw is thrown here.
  Ended finish() {
    follower_.finish();
    decoder_.finish();
    out_.close();
    return {stats_, follower_.read(), follower_.cut()};
  }

 private:
  Stats stats_;
  EventStoreWriter out_;
  Decoder decoder_;
  SpoolFollower follower_;
};

}  // namespace cudatrace
