#include "harness/score/live_scoring.h"

#include <algorithm>

#include "common/packed_args.h"

namespace cudatrace {

LiveScoring::LiveScoring(EventTally& tally, const std::filesystem::path& spill_dir) : tally_(tally) {
  MatchOptions opts;
  opts.spill_dir = spill_dir;
  try {
    matcher_ = std::make_unique<StreamMatcher>(
        std::vector<std::string>{layer::kRuntime, layer::kDriver, layer::kGpuActivity, layer::kDevice, layer::kSyscall},
        opts);
  } catch (const std::exception& e) {
    failed_ = e.what();
  }
}

LiveScoring::~LiveScoring() = default;

void LiveScoring::on_event(const Event& e) { on_packed(e, e.is_meta() ? std::string() : pack_json_args(e.args), true); }

// Called from the tracer's writer, which must not fail for the scoring's sake: what the
// matcher throws stops it (the run is then scored from the store), never the writer.
void LiveScoring::on_packed(const Event& e, std::string_view packed, bool args_in_event) {
  ++fed_;
  if (tally_.wants_packed()) {  // a kernel counted from its packed args, no JSON built
    tally_.on_packed(e, packed, args_in_event);
  } else if (args_in_event || !tally_.wants_args(e)) {
    tally_.add(e);
  } else {
    with_args_ = e;
    with_args_.args = unpack_args(packed);
    tally_.add(with_args_);
  }
  if (!matcher_) return;
  try {
    matcher_->add_seen(e, packed);
  } catch (const NotStreamable& x) {
    failed_ = x.what();
    not_streamable_ = true;
    matcher_.reset();
  } catch (const std::exception& x) {
    failed_ = x.what();
    matcher_.reset();
  }
}

void LiveScoring::on_closed(uint64_t written) {
  tally_.on_closed(written);
  whole_ = written == fed_;
}

LiveScoring::Taken LiveScoring::take(const TracerReport& report) {
  Taken t;
  const bool device_by_block = report.device_mode == "block" ||
                               std::find(report.layers.begin(), report.layers.end(), layer::kDevice) == report.layers.end();
  if (!whole_) t.unused = "the store was not written whole while the program ran";
  else if (not_streamable_) t.not_streamable = failed_;
  else if (!matcher_) t.unused = failed_;
  else if (!device_by_block) t.unused = "the device layer is counted per " + report.device_mode;
  else t.matcher = std::move(matcher_);
  matcher_.reset();
  return t;
}

}  // namespace cudatrace
