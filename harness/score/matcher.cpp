#include "harness/score/matcher.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <deque>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "common/cuda_names.h"
#include "common/packed_args.h"
#include "harness/score/call_families.h"
#include "harness/score/sorted_events.h"

namespace cudatrace {

namespace {

// A ledger launch whose kernel runs on the GPU now: not one the workload made to fail, nor
// one captured into a graph (the graph's replays run it: "execution" records say how often).
bool kernel_runs(const Event& t, const PackedArgsView& args) {
  const std::string c = canonical_name(t.name);
  if (!(t.layer == layer::kRuntime ? is_runtime_launch(c) : t.layer == layer::kDriver && is_driver_launch(c)))
    return false;
  const auto expect = args.find("expect");
  const std::string_view e = expect && expect->kind == PackedValue::Kind::kText ? expect->text : "";
  return args.contains("kernel") && e != "launch error" && e != "captured" && (!t.ret || *t.ret == 0);
}

int64_t dim_product(const std::optional<PackedValue>& v) {
  if (!v) return 0;
  const nlohmann::json d = v->to_json();
  if (!d.is_array()) return 0;
  int64_t p = 1;
  for (const auto& x : d) p *= x.is_number_integer() ? x.get<int64_t>() : 0;
  return p;
}

int64_t integer_or(const std::optional<PackedValue>& v, int64_t fallback) {
  return v && v->kind == PackedValue::Kind::kInt ? v->integer : fallback;
}

// A kernel's name as the layers count it: its "kernel" argument, or `otherwise`.
std::string kernel_of(const PackedArgsView& args, const std::string& otherwise, bool any_value) {
  const auto k = args.find("kernel");
  if (!k) return otherwise;
  if (k->kind == PackedValue::Kind::kText) return std::string(k->text);
  return any_value ? k->to_json().dump() : otherwise;
}

// How a sorter's calls are grouped within their thread.
enum class Grouping { kByName, kOneFamily, kNone };

// Runtime or driver: the ledger's calls and the method's, each sorted by (thread, family,
// entry time), paired lane by lane.
struct CallLayer {
  LayerScore score;
  std::unique_ptr<SortedEvents> truth, seen;
  Grouping seen_grouping = Grouping::kByName;
  bool attributing = false;  // the method names a device on some record of this layer
};

// Kernel-level layers have no host thread: runs are compared per kernel name.
struct CountLayer {
  LayerScore score;
  std::map<DeviceRef, std::map<std::string, int64_t>> expected, seen;  // -> kernel -> units
  bool attributing = false;
};

// The per-(process, device) tally of a ledger record, looked up once per run of records
// from one (process, device): std::map keys of two strings, built per call, were a tenth
// of the pairing.
class BucketMemo {
 public:
  explicit BucketMemo(const BucketContext& bc, Buckets& buckets) : bc_(bc), buckets_(buckets) {}
  BucketTally* of(const Event& t) {
    if (!bc_.labels) return nullptr;
    if (!tally_ || t.pid != pid_ || t.device != device_ || t.device_id != device_id_) {
      tally_ = &buckets_[bc_.truth(t)];
      pid_ = t.pid, device_ = t.device, device_id_ = t.device_id;
    }
    return tally_;
  }

 private:
  const BucketContext& bc_;
  Buckets& buckets_;
  BucketTally* tally_ = nullptr;
  int64_t pid_ = 0;
  std::optional<int64_t> device_;
  std::string device_id_;
};

}  // namespace

struct Matcher::Impl {
  std::vector<std::string> layers;
  MatchOptions opts;
  Families families;
  std::unique_ptr<CallLayer> runtime, driver;
  std::unique_ptr<SortedEvents> launch_truth;  // runtime launches: the driver layer's truth without driver calls
  std::set<std::string> driver_families;       // families of the ledger's own driver calls
  std::unique_ptr<CountLayer> gpu, device;
  std::unique_ptr<CallLayer> syscall;
  uint64_t truth_seq = 0, seen_seq = 0;
  bool seen_begun = false;
  // Per family, what each of the method's records would otherwise look up by name in a map
  // (filled as families appear; the ledger is whole by then, so driver_families is too).
  struct SeenFamily {
    bool known = false, driver_unscored = false;
    NameScore *runtime = nullptr, *driver = nullptr;
  };
  std::vector<SeenFamily> seen_families;
  SeenFamily& seen_family(uint32_t f) {
    if (f >= seen_families.size()) seen_families.resize(f + 1);
    SeenFamily& s = seen_families[f];
    if (!s.known) {
      s.known = true;
      const std::string& family = families.name(f);
      s.driver_unscored = driver_families.empty() ? !is_driver_launch(family) : !driver_families.count(family);
    }
    return s;
  }
  // Made at the family's first record that counts: a layer's by_name lists no other.
  NameScore& runtime_seen(uint32_t f) {
    SeenFamily& s = seen_family(f);
    if (!s.runtime) s.runtime = &runtime->score.by_name[families.name(f)];
    return *s.runtime;
  }
  NameScore& driver_seen(uint32_t f) {
    SeenFamily& s = seen_family(f);
    if (!s.driver) s.driver = &driver->score.by_name[driver_families.empty() ? "launch" : families.name(f)];
    return *s.driver;
  }

  std::unique_ptr<SortedEvents> sorter(const std::string& tag) const {
    return std::make_unique<SortedEvents>(opts.spill_dir, tag, opts.sort_chunk);
  }
  uint32_t family(Grouping g, const Event& e) {
    return g == Grouping::kByName ? families.of_call(e.name) : families.of(g == Grouping::kOneFamily ? "launch" : "");
  }
  bool per_thread_device() const { return opts.device_mode == "thread" || opts.device_mode == "launch-thread"; }
  void begin_seen();
  void truth_runs(const Event& t, std::string_view packed);
  void seen_call(CallLayer& l, const Event& e, std::string_view packed, bool unscored,
                 std::optional<uint32_t> by_name = std::nullopt);
  void seen_count(CountLayer& l, const Event& e, std::string_view packed, const char* weight_arg);
  // `tag` names its scratch files: layers are joined side by side.
  void join(const std::string& tag, LayerScore& score, bool attributing, SortedEvents& truth, SortedEvents& seen);
  void finish_counts(CountLayer& l, const std::string& expectation);
  void sweep_syscalls();
};

Matcher::Matcher(std::vector<std::string> layers, MatchOptions opts) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.layers = std::move(layers);
  m.opts = std::move(opts);
  if (m.opts.spill_dir.empty()) {  // a fresh folder of its own (mkdtemp: 0700, a name nobody chose before)
    std::string tmpl = (std::filesystem::temp_directory_path() / "cudatrace-match.XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot make a folder to sort events in: " + tmpl);
    m.opts.spill_dir = tmpl;
  }
  for (const auto& l : m.layers) {
    if (m.opts.seen_first && (l == layer::kRuntime || l == layer::kDriver))
      throw std::logic_error("Matcher: the " + l + " layer is paired with the ledger read first");
    if (l == layer::kRuntime) {
      m.runtime = std::make_unique<CallLayer>();
      m.runtime->truth = m.sorter("runtime.truth");
    } else if (l == layer::kDriver) {
      m.driver = std::make_unique<CallLayer>();
      m.driver->truth = m.sorter("driver.truth");
      m.launch_truth = m.sorter("launch.truth");
    } else if (l == layer::kGpuActivity) {
      m.gpu = std::make_unique<CountLayer>();
    } else if (l == layer::kDevice) {
      m.device = std::make_unique<CountLayer>();
    } else if (l == layer::kSyscall) {
      m.syscall = std::make_unique<CallLayer>();
      m.syscall->truth = m.sorter("syscall.truth");
      m.syscall->seen_grouping = Grouping::kNone;
    }
  }
}

Matcher::~Matcher() {
  Impl& m = *impl_;
  const std::filesystem::path dir = m.opts.spill_dir;
  impl_.reset();  // the sorters remove their files
  std::error_code ec;
  std::filesystem::remove(dir, ec);  // the folder, once empty
}

void Matcher::add_truth(const Event& t) {
  if (t.is_meta()) return;
  add_truth(t, pack_json_args(t.args));
}

void Matcher::add_truth(const Event& t, std::string_view packed) {
  Impl& m = *impl_;
  if (t.is_meta()) return;
  if (m.seen_begun && !m.opts.seen_first) throw std::logic_error("Matcher::add_truth after add_seen");
  const uint64_t seq = m.truth_seq++;  // its place in the ledger: program order within a thread
  const bool call = t.layer == layer::kRuntime || t.layer == layer::kDriver;
  const uint32_t by_name = call ? m.families.of_call(t.name) : 0;  // looked up once per record
  if (m.runtime && t.layer == layer::kRuntime) m.runtime->truth->add(t, packed, by_name, seq);
  if (m.driver && t.layer == layer::kDriver) {
    m.driver_families.insert(m.families.name(by_name));
    m.driver->truth->add(t, packed, by_name, seq);
  }
  if (m.driver && t.layer == layer::kRuntime && is_runtime_launch(m.families.name(by_name)))
    m.launch_truth->add(t, packed, m.family(Grouping::kOneFamily, t), seq);
  if (m.syscall && call) m.syscall->truth->add(t, packed, m.family(Grouping::kNone, t), seq);
  if (m.gpu || m.device) m.truth_runs(t, packed);
}

// Kernel runs: launches that run now, and the executions graph replays cause.
void Matcher::Impl::truth_runs(const Event& t, std::string_view packed) {
  const PackedArgsView args(packed);
  const bool execution = t.layer == layer::kExecution;
  if (!execution && !kernel_runs(t, args)) return;
  const int64_t times = execution ? integer_or(args.find("times"), 1) : 1;
  const std::string kernel = execution ? t.name : kernel_of(args, t.name, true);
  if (gpu) gpu->expected[ref_of(t)][kernel] += times;
  if (device) {
    const int64_t units =
        times * dim_product(args.find("grid")) * (per_thread_device() ? dim_product(args.find("block")) : 1);
    device->expected[ref_of(t)][kernel] += units;
  }
}

void Matcher::Impl::begin_seen() {
  seen_begun = true;
  // The ledger is whole: its sorters merge in the background while the method's events are read.
  if (runtime) {
    runtime->truth->seal();
    runtime->seen = sorter("runtime.seen");
  }
  // A program that calls the driver itself (driverapi): its calls are the truth, per family.
  // Otherwise one driver launch is expected inside each runtime launch, whatever its family.
  if (driver) {
    (driver_families.empty() ? launch_truth : driver->truth)->seal();
    driver->seen = sorter("driver.seen");
    driver->seen_grouping = driver_families.empty() ? Grouping::kOneFamily : Grouping::kByName;
  }
  if (syscall) {
    if (!opts.seen_first) syscall->truth->seal();  // else sealed by finish(), the ledger read
    syscall->seen = sorter("syscall.seen");
  }
}

// `by_name`: the call's family by its name, where the caller looked it up already.
void Matcher::Impl::seen_call(CallLayer& l, const Event& e, std::string_view packed, bool unscored,
                              std::optional<uint32_t> by_name) {
  ++l.score.seen;
  l.attributing |= DeviceNames::names_a_device(e);
  if (unscored) {
    ++l.score.unscored;
    return;
  }
  const uint32_t f = by_name && l.seen_grouping == Grouping::kByName ? *by_name : family(l.seen_grouping, e);
  l.seen->add(e, packed, f, seen_seq);
}

void Matcher::Impl::seen_count(CountLayer& l, const Event& e, std::string_view packed, const char* weight_arg) {
  // An event may stand for several units (the device layer in thread mode: one event per
  // block, args.threads threads seen in it).
  const PackedArgsView args(packed);
  const int64_t units = weight_arg ? integer_or(args.find(weight_arg), 1) : 1;
  l.score.seen += units;
  l.attributing |= DeviceNames::names_a_device(e);
  const std::string kernel = kernel_of(args, e.name, false);
  l.score.by_name[kernel].seen += units;
  l.seen[ref_of(e)][kernel] += units;  // by place even before the labels are known (a matcher fed as the program ran)
}

void Matcher::add_seen(const Event& e) {
  if (e.is_meta()) {
    add_seen(e, "");
    return;
  }
  add_seen(e, pack_json_args(e.args));
}

void Matcher::add_seen(const Event& e, std::string_view packed) {
  Impl& m = *impl_;
  if (!m.seen_begun) m.begin_seen();
  if (e.is_meta()) return;
  if (m.runtime && e.layer == layer::kRuntime) {
    const bool internal = is_runtime_internal(e.name);
    const uint32_t f = m.families.of_call(e.name);
    if (!internal) ++m.runtime_seen(f).seen;
    m.seen_call(*m.runtime, e, packed, internal, f);
  } else if (m.driver && e.layer == layer::kDriver) {
    // Driver calls of families the program never makes itself are counted, not scored.
    const uint32_t f = m.families.of_call(e.name);
    const bool unscored = m.seen_family(f).driver_unscored;
    if (!unscored) ++m.driver_seen(f).seen;
    m.seen_call(*m.driver, e, packed, unscored, f);
  } else if (m.gpu && e.layer == layer::kGpuActivity) {
    m.seen_count(*m.gpu, e, packed, nullptr);
  } else if (m.device && e.layer == layer::kDevice) {
    const char* weight = m.per_thread_device() ? "threads" : m.opts.device_mode == "launch" ? "blocks" : nullptr;
    m.seen_count(*m.device, e, packed, weight);
  } else if (m.syscall && e.layer == layer::kSyscall) {
    m.seen_call(*m.syscall, e, packed, false);
  }
  ++m.seen_seq;
}

// Pairs ledger calls with the method's of the same thread and family. Where both carry
// timestamps, an event belongs to the call whose [begin, end] holds its entry time, so a
// phantom or a missing call does not shift every later pair; otherwise pairs go in order.
// A method may hand calls over as they return, or (cupti's kernels) in the order the GPU
// finished: each lane is read in time order. Matched pairs that come out of the ledger's
// order within their thread are order violations.
void Matcher::Impl::join(const std::string& tag, LayerScore& score, bool attributing, SortedEvents& truth,
                         SortedEvents& seen) {
  PairScorer scorer{score, opts.max_examples, opts.buckets};
  const BucketContext& bc = opts.buckets;
  const bool breakdown = bc.labels != nullptr;
  BucketMemo buckets(bc, score.buckets);
  SortedEvents pairs(opts.spill_dir, tag + ".pairs", opts.sort_chunk);
  SortedCall t, e;
  NameScore* by_name = nullptr;  // t's family's
  uint32_t by_name_of = UINT32_MAX;
  bool has_t = truth.next(t), has_e = seen.next(e);
  const auto expected = [&] {
    ++score.expected;
    if (t.family != by_name_of) by_name = &score.by_name[families.name(t.family)], by_name_of = t.family;
    ++by_name->expected;
    if (breakdown) ++buckets.of(t.e)->expected;
  };
  const auto missing = [&] {
    expected();
    ++score.missing;
    if (breakdown) ++buckets.of(t.e)->missing;
    if (scorer.wants_example()) scorer.example("missing: " + describe(t.e));
    has_t = truth.next(t);
  };
  const auto phantom = [&] {
    ++score.phantom;
    if (breakdown) ++score.buckets[bc.seen(e.e, attributing)].phantom;
    if (scorer.wants_example()) scorer.example("phantom: " + describe(e.e));
    has_e = seen.next(e);
  };
  // Pairs as keys: (thread, place in the ledger as its ts) and the place in the method's store as its seq.
  while (has_t && has_e) {
    const auto lane_t = std::tie(t.e.tid, t.family), lane_e = std::tie(e.e.tid, e.family);
    if (lane_t < lane_e) {
      missing();
      continue;
    }
    if (lane_e < lane_t) {
      phantom();
      continue;
    }
    if (t.e.ts != 0 && e.e.ts != 0) {
      const int64_t lo = t.e.ts - opts.slack_ns, hi = t.e.ts + t.e.dur.value_or(0) + opts.slack_ns;
      if (e.e.ts < lo) {
        phantom();
        continue;
      }
      if (e.e.ts > hi) {
        missing();
        continue;
      }
    }
    expected();
    ++score.matched;
    ++by_name->matched;
    if (breakdown) ++buckets.of(t.e)->matched;
    scorer.compare(t.e, t.args, e.e, e.args);
    pairs.add_key(t.e.tid, int64_t(t.seq), 0, e.seq);
    has_t = truth.next(t);
    has_e = seen.next(e);
  }
  while (has_t) missing();
  while (has_e) phantom();
  SortedCall p;
  int64_t tid = 0;
  uint64_t latest = 0;
  bool any = false;
  while (pairs.next(p)) {
    if (!any || p.e.tid != tid) {
      tid = p.e.tid;
      latest = p.seq;
      any = true;
      continue;
    }
    if (p.seq < latest) ++score.order_violations;
    latest = std::max(latest, p.seq);
  }
}

void Matcher::Impl::finish_counts(CountLayer& l, const std::string& expectation) {
  LayerScore& score = l.score;
  score.expectation = expectation;
  PairScorer scorer{score, opts.max_examples, opts.buckets};
  std::map<BucketKey, std::map<std::string, int64_t>> want, got;
  for (const auto& [ref, kernels] : l.expected)
    for (const auto& [kernel, n] : kernels) {
      score.by_name[kernel].expected += n;
      if (opts.buckets.labels) want[opts.buckets.truth(event_at(ref))][kernel] += n;
    }
  for (const auto& [ref, kernels] : l.seen)
    for (const auto& [kernel, n] : kernels) got[opts.buckets.seen(event_at(ref), l.attributing)][kernel] += n;
  if (opts.buckets.labels) score.buckets = count_buckets(want, got);
  for (auto& [name, n] : score.by_name) {
    n.matched = std::min(n.expected, n.seen);
    score.expected += n.expected;
    score.matched += n.matched;
    score.missing += n.expected - n.matched;
    score.phantom += n.seen - n.matched;
    if (n.seen != n.expected)
      scorer.example(name + ": expected " + std::to_string(n.expected) + ", seen " + std::to_string(n.seen));
  }
}

// Syscall layer (strace): no call is a syscall, so the score is visibility: a ledger call
// is "seen" when its thread made at least one syscall while it ran. Both sides come sorted
// by (thread, time); the syscalls within reach of the current call are held in a window.
void Matcher::Impl::sweep_syscalls() {
  LayerScore& score = syscall->score;
  score.expectation = "ledger calls during which their thread made at least one syscall";
  SortedCall t, s;
  bool has_s = syscall->seen->next(s);
  std::deque<std::pair<int64_t, std::string>> window;  // (entry time, label); ioctls by request name
  int64_t window_tid = 0;
  bool window_open = false;
  while (syscall->truth->next(t)) {
    const std::string name = canonical_name(t.e.name);
    ++score.expected;
    ++score.by_name[name].expected;
    BucketTally* bucket = opts.buckets.labels ? &score.buckets[opts.buckets.truth(t.e)] : nullptr;
    if (bucket) ++bucket->expected;
    if (!window_open || t.e.tid != window_tid) window.clear(), window_tid = t.e.tid, window_open = true;
    const int64_t lo = t.e.ts - opts.slack_ns, hi = t.e.ts + t.e.dur.value_or(0) + opts.slack_ns;
    while (has_s && s.e.tid < t.e.tid) has_s = syscall->seen->next(s);
    while (has_s && s.e.tid == t.e.tid && s.e.ts <= hi) {
      std::string label = s.e.name;
      if (const auto r = PackedArgsView(s.args).find("request"); r && r->kind == PackedValue::Kind::kText)
        label += ":" + std::string(r->text);
      window.push_back({s.e.ts, std::move(label)});
      has_s = syscall->seen->next(s);
    }
    while (!window.empty() && window.front().first < lo) window.pop_front();
    bool visible = false;
    for (const auto& [ts, label] : window) {
      if (ts > hi) break;
      visible = true;
      ++score.seen_during[name][label];
    }
    if (visible) {
      ++score.matched;
      ++score.by_name[name].matched;
      if (bucket) ++bucket->matched;
    } else {
      ++score.missing;
      if (bucket) ++bucket->missing;
    }
  }
}

std::vector<LayerScore> Matcher::finish() {
  Impl& m = *impl_;
  if (!m.seen_begun) m.begin_seen();
  for (CallLayer* l : {m.runtime.get(), m.driver.get(), m.syscall.get()})
    if (l) l->seen->seal();
  if (m.opts.seen_first && m.syscall) m.syscall->truth->seal();
  // Each layer is scored on a thread of its own: its sorters and its score are its own, and
  // what they share (the family names, the device names) is only read now.
  std::vector<std::pair<std::string, std::future<LayerScore*>>> jobs;
  for (const auto& l : m.layers) {
    std::function<LayerScore*()> job;
    if (l == layer::kRuntime && m.runtime) {
      job = [&m] {
        m.runtime->score.expectation = "every runtime call in the ledger";
        m.join("runtime", m.runtime->score, m.runtime->attributing, *m.runtime->truth, *m.runtime->seen);
        return &m.runtime->score;
      };
    } else if (l == layer::kDriver && m.driver) {
      job = [&m] {
        const bool own = !m.driver_families.empty();
        m.driver->score.expectation = own ? "every driver call in the ledger (other driver families: unscored)"
                                          : "one driver launch (cuLaunchKernel family) inside each ledger launch";
        m.join("driver", m.driver->score, m.driver->attributing, own ? *m.driver->truth : *m.launch_truth, *m.driver->seen);
        return &m.driver->score;
      };
    } else if (l == layer::kGpuActivity && m.gpu) {
      job = [&m] {
        m.finish_counts(*m.gpu, "one kernel record per kernel run (launches, and graph replays' executions)");
        return &m.gpu->score;
      };
    } else if (l == layer::kDevice && m.device) {
      job = [&m] {
        m.finish_counts(*m.device, m.per_thread_device() ? "grid x block threads per kernel run" : "grid blocks per kernel run");
        return &m.device->score;
      };
    } else if (l == layer::kSyscall && m.syscall) {
      job = [&m] {
        m.sweep_syscalls();
        return &m.syscall->score;
      };
    }
    if (job) jobs.emplace_back(l, std::async(std::launch::async, std::move(job)));
  }
  std::vector<LayerScore> out;
  std::exception_ptr failed;
  for (auto& [l, job] : jobs) try {  // every thread is waited for before an error goes up
      LayerScore* done = job.get();
      done->layer = l;
      out.push_back(std::move(*done));
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  if (failed) std::rethrow_exception(failed);
  return out;
}

void Matcher::set_truth_options(int64_t slack_ns, BucketContext buckets, const std::vector<std::string>& layers) {
  Impl& m = *impl_;
  m.opts.slack_ns = slack_ns;
  m.opts.buckets = buckets;
  const auto kept = [&](const char* l) { return std::find(layers.begin(), layers.end(), l) != layers.end(); };
  if (!kept(layer::kGpuActivity)) m.gpu.reset();
  if (!kept(layer::kDevice)) m.device.reset();
  if (!kept(layer::kSyscall)) m.syscall.reset();  // else every ledger call is its truth, sorted for nothing
  std::vector<std::string> left;
  for (const auto& l : m.layers)
    if (kept(l.c_str())) left.push_back(l);
  m.layers = left;
}

std::vector<LayerScore> match(const std::vector<Event>& ledger, const std::vector<Event>& events,
                              const std::vector<std::string>& layers, const MatchOptions& opts) {
  Matcher m(layers, opts);
  for (const auto& t : ledger) m.add_truth(t);
  for (const auto& e : events) m.add_seen(e);
  return m.finish();
}

}  // namespace cudatrace
