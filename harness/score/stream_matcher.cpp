#include "harness/score/stream_matcher.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <future>
#include <thread>
#include <array>
#include <set>

#include "common/cuda_names.h"
#include "common/packed_args.h"
#include "harness/score/call_families.h"
#include "harness/score/join_shard.h"

namespace cudatrace {

struct StreamMatcher::Impl {
  std::vector<std::string> layers;
  MatchOptions opts;
  Families families;
  std::unique_ptr<Matcher> others;  // the layers that are not runtime or driver calls

  // One call layer: the method's calls per thread, what was counted of them as they came,
  // and the join(s) that pair them with the ledger's.
  struct Calls {
    LayerScore score;
    std::unique_ptr<CallSpool> spool;
    bool attributing = false;        // the method names a device on some call of this layer
    std::vector<int64_t> by_family;  // the method's calls per family (runtime: bar cudart's internals)
  };
  std::unique_ptr<Calls> runtime, driver;
  // The driver layer is paired one of two ways, told apart only once the whole ledger is
  // read (Matcher::begin_seen): against the program's own driver calls, by family, where the
  // ledger has any; else one driver launch inside each runtime launch. Both are kept going.
  std::vector<std::unique_ptr<JoinShard>> shards;  // each pairs its share of the threads, all three ways
  std::set<std::string> driver_families;  // of the ledger's own driver calls
  uint32_t launch_family = 0;
  uint64_t seen_seq = 0, truth_seq = 0;
  bool truth_begun = false;


  void spool(Calls& l, const Event& e, uint32_t family, uint64_t seq, std::string_view packed) {
    SpooledCall c;
    c.ts = e.ts, c.pid = e.pid, c.tid = e.tid, c.dur = e.dur, c.ret = e.ret, c.device = e.device;
    c.seq = seq, c.family = family, c.args = packed;
    if (!l.spool->add(c, e.name, e.device_id))
      throw NotStreamable("more threads or distinct names than the join holds");
  }
  static void count(std::vector<int64_t>& v, uint32_t f) {
    if (f >= v.size()) v.resize(f + 1, 0);
    ++v[f];
  }
  StreamJoin::Setup setup(const Calls* l, std::vector<int32_t> family_of_seen, size_t shard) const {
    if (!l) return {};
    return {l->spool.get(), std::move(family_of_seen), &families, opts.slack_ns, opts.max_examples, shard, shard_count()};
  }
  size_t shard_count() const {
    if (opts.stream_shards) return opts.stream_shards;
    const size_t cores = std::thread::hardware_concurrency();
    return std::clamp<size_t>(cores > 1 ? cores - 1 : 1, 1, 8);
  }
  // A ledger call handed to the shard of its thread, for one of its joins.
  void route(JoinShard::Join j, const Event& t, std::string_view packed, uint32_t family, uint64_t seq) {
    JoinShard& sh = *shards[shard_of(t.tid, shards.size())];
    JoinShard::Item& it = sh.slot();
    it.join = j;
    StreamJoin::Truth& c = it.t;
    c.ts = t.ts, c.pid = t.pid, c.tid = t.tid, c.dur = t.dur, c.ret = t.ret, c.device = t.device;
    c.seq = seq, c.family = family;
    c.name.assign(t.name), c.device_id.assign(t.device_id), c.args.assign(packed);
    sh.commit();
  }
  LayerScore gather(JoinShard::Join j, const Calls& l, const std::function<bool(uint32_t)>& scored);
  std::vector<int32_t> every_family() const {
    std::vector<int32_t> map(families_known);
    for (size_t f = 0; f < map.size(); ++f) map[f] = int32_t(f);
    return map;
  }
  size_t families_known = 0;  // when the ledger began: every family of the method's calls
  void begin_truth();
  LayerScore finish_runtime();
  LayerScore finish_driver();
};

StreamMatcher::StreamMatcher(std::vector<std::string> layers, MatchOptions opts) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.layers = std::move(layers);
  m.opts = std::move(opts);
  if (m.opts.spill_dir.empty()) {  // a fresh folder of its own, as Matcher makes
    std::string tmpl = (std::filesystem::temp_directory_path() / "cudatrace-match.XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot make a folder to score events in: " + tmpl);
    m.opts.spill_dir = tmpl;
  }
  std::vector<std::string> others;
  for (const auto& l : m.layers) {
    if (l == layer::kRuntime || l == layer::kDriver) {
      auto& calls = l == layer::kRuntime ? m.runtime : m.driver;
      calls = std::make_unique<Impl::Calls>();
      calls->spool = std::make_unique<CallSpool>(m.opts.spill_dir, l + ".calls");
    } else {
      others.push_back(l);
    }
  }
  if (!others.empty()) {
    MatchOptions o = m.opts;
    o.seen_first = true;
    m.others = std::make_unique<Matcher>(others, o);
  }
}

StreamMatcher::~StreamMatcher() {
  const std::filesystem::path dir = impl_->opts.spill_dir;
  impl_.reset();  // the spools remove their files
  std::error_code ec;
  std::filesystem::remove(dir, ec);  // the folder, once empty
}

void StreamMatcher::add_seen(const Event& e, std::string_view packed) {
  Impl& m = *impl_;
  if (m.truth_begun) throw std::logic_error("StreamMatcher::add_seen after add_truth");
  if (m.others) m.others->add_seen(e, packed);
  if (e.is_meta()) return;
  const uint64_t seq = m.seen_seq++;
  Impl::Calls* l = e.layer == layer::kRuntime ? m.runtime.get() : e.layer == layer::kDriver ? m.driver.get() : nullptr;
  if (!l) return;
  ++l->score.seen;
  l->attributing |= DeviceNames::names_a_device(e);
  if (l == m.runtime.get() && is_runtime_internal(e.name)) {  // cudart's own: no ledger has them
    ++l->score.unscored;
    return;
  }
  const uint32_t f = m.families.of_call(e.name);
  Impl::count(l->by_family, f);
  m.spool(*l, e, f, seq, packed);
}

void StreamMatcher::set_truth_options(int64_t slack_ns, BucketContext buckets, const std::vector<std::string>& layers) {
  Impl& m = *impl_;
  if (m.truth_begun) throw std::logic_error("StreamMatcher::set_truth_options after add_truth");
  m.opts.slack_ns = slack_ns;
  m.opts.buckets = buckets;
  const auto kept = [&](const std::string& l) { return std::find(layers.begin(), layers.end(), l) != layers.end(); };
  if (!kept(layer::kRuntime)) m.runtime.reset();  // its calls are not read back
  if (!kept(layer::kDriver)) m.driver.reset();
  std::vector<std::string> left;
  bool others_kept = false;
  for (const auto& l : m.layers)
    if (kept(l)) left.push_back(l), others_kept |= l != layer::kRuntime && l != layer::kDriver;
  m.layers = left;
  // A matcher with no layer left would still be handed every ledger record, to look up its
  // family and drop it: a sixth of the reading's time per record (perf, score_scale).
  if (!others_kept) m.others.reset();
  if (m.others) m.others->set_truth_options(slack_ns, buckets, layers);
}

void StreamMatcher::Impl::begin_truth() {
  truth_begun = true;
  families_known = families.size();
  launch_family = families.of("launch");
  std::vector<int32_t> launches(families_known, -1);
  for (size_t f = 0; f < families_known; ++f)
    if (is_driver_launch(families.name(uint32_t(f)))) launches[f] = int32_t(launch_family);
  // The driver layer is paired both ways until the ledger says which holds (finish_driver).
  for (size_t i = 0, n = shard_count(); i < n; ++i)
    shards.push_back(std::make_unique<JoinShard>(std::array<StreamJoin::Setup, JoinShard::kJoins>{
        setup(runtime.get(), every_family(), i), setup(driver.get(), launches, i), setup(driver.get(), every_family(), i)}));
}

void StreamMatcher::add_truth(const Event& t, std::string_view packed) {
  Impl& m = *impl_;
  if (m.others) m.others->add_truth(t, packed);
  if (t.is_meta()) return;
  if (!m.truth_begun) m.begin_truth();
  const uint64_t seq = m.truth_seq++;
  const bool runtime = t.layer == layer::kRuntime;
  if (!runtime && t.layer != layer::kDriver) return;
  const uint32_t f = m.families.of_call(t.name);
  if (runtime && m.runtime) m.route(JoinShard::kRuntime, t, packed, f, seq);
  if (!m.driver) return;
  if (!runtime) {
    m.driver_families.insert(m.families.name(f));
    m.route(JoinShard::kDriver, t, packed, f, seq);
  } else if (is_runtime_launch(m.families.name(f))) {
    m.route(JoinShard::kLaunch, t, packed, m.launch_family, seq);
  }
}

// One join's scores over every shard, each shard's threads played to their end side by side.
LayerScore StreamMatcher::Impl::gather(JoinShard::Join j, const Calls& l, const std::function<bool(uint32_t)>& scored) {
  std::vector<std::future<void>> ends;
  for (auto& sh : shards)
    ends.push_back(std::async(std::launch::async, [&, s = sh.get()] { s->join(j)->finish(opts.buckets, l.attributing, scored); }));
  std::exception_ptr failed;
  for (auto& e : ends) try {  // every thread is waited for before an error goes up
      e.get();
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  if (failed) std::rethrow_exception(failed);
  LayerScore s;
  for (auto& sh : shards) s.add(sh->score(j));
  return s;
}

LayerScore StreamMatcher::Impl::finish_runtime() {
  LayerScore s = gather(JoinShard::kRuntime, *runtime, [](uint32_t) { return true; });
  s.layer = layer::kRuntime;
  s.expectation = "every runtime call in the ledger";
  s.seen = runtime->score.seen, s.unscored = runtime->score.unscored;
  for (uint32_t f = 0; f < runtime->by_family.size(); ++f)
    if (runtime->by_family[f]) s.by_name[families.name(f)].seen += runtime->by_family[f];
  return s;
}

LayerScore StreamMatcher::Impl::finish_driver() {
  const bool own = !driver_families.empty();
  const auto scored = [&](uint32_t f) { return !own || driver_families.count(families.name(f)) > 0; };
  LayerScore s = gather(own ? JoinShard::kDriver : JoinShard::kLaunch, *driver, scored);
  s.layer = layer::kDriver;
  s.seen = driver->score.seen, s.unscored = driver->score.unscored;
  const auto& seen = driver->by_family;
  if (!own) {  // one driver launch inside each runtime launch
    s.expectation = "one driver launch (cuLaunchKernel family) inside each ledger launch";
    int64_t launches = 0;
    for (uint32_t f = 0; f < seen.size(); ++f) (is_driver_launch(families.name(f)) ? launches : s.unscored) += seen[f];
    if (launches) s.by_name["launch"].seen += launches;
    return s;
  }
  s.expectation = "every driver call in the ledger (other driver families: unscored)";
  for (uint32_t f = 0; f < seen.size(); ++f) {
    if (!seen[f]) continue;
    if (scored(f)) s.by_name[families.name(f)].seen += seen[f];
    else s.unscored += seen[f];
  }
  return s;
}

std::vector<LayerScore> StreamMatcher::finish() {
  Impl& m = *impl_;
  if (!m.truth_begun) m.begin_truth();  // an empty ledger: every call of the method a phantom
  std::exception_ptr failed;
  for (auto& sh : m.shards) try {  // every worker done before an error goes up
      sh->close();
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  if (failed) std::rethrow_exception(failed);
  std::vector<LayerScore> others;
  if (m.others) others = m.others->finish();
  std::vector<LayerScore> out;
  for (const auto& l : m.layers) {
    if (l == layer::kRuntime) out.push_back(m.finish_runtime());
    else if (l == layer::kDriver) out.push_back(m.finish_driver());
    else
      for (auto& o : others)
        if (o.layer == l) out.push_back(std::move(o));
  }
  return out;
}

std::vector<LayerScore> stream_match(const std::vector<Event>& ledger, const std::vector<Event>& events,
                                     const std::vector<std::string>& layers, const MatchOptions& opts) {
  StreamMatcher m(layers, opts);
  for (const auto& e : events) m.add_seen(e, e.is_meta() ? std::string() : pack_json_args(e.args));
  for (const auto& t : ledger) m.add_truth(t, t.is_meta() ? std::string() : pack_json_args(t.args));
  return m.finish();
}

}  // namespace cudatrace
