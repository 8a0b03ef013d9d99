#include "harness/score/stream_join.h"

#include <algorithm>
#include <climits>

namespace cudatrace {

namespace {

// A queue that keeps its slots: a pending call's strings are refilled in place, with no
// allocation per call once the queue has grown to what a thread keeps waiting.
template <class T>
class Ring {
 public:
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  T& at(size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  T& back() { return at(count_ - 1); }
  void pop_front() { head_ = (head_ + 1) & (slots_.size() - 1), --count_; }
  void pop_back() { --count_; }
  T& push_slot() {  // the new last element, holding whatever its slot held before
    if (count_ == slots_.size()) grow();
    ++count_;
    return back();
  }

 private:
  void grow() {
    std::vector<T> bigger(std::max<size_t>(4, slots_.size() * 2));
    for (size_t i = 0; i < count_; ++i) std::swap(bigger[i], at(i));
    slots_.swap(bigger);
    head_ = 0;
  }
  std::vector<T> slots_;
  size_t head_ = 0, count_ = 0;
};

// A method's call read ahead, its args its own (the reader's buffer moves on).
struct Held {
  SpooledCall c;
  std::string args;
};
bool before(const SpooledCall& a, const SpooledCall& b) { return a.ts < b.ts || (a.ts == b.ts && a.seq < b.seq); }

}  // namespace

struct StreamJoin::Thread {
  Thread(int64_t id, CallSpool::Reader r) : tid(id), reader(std::move(r)) {}
  int64_t tid;
  CallSpool::Reader reader;
  Ring<Held> ahead;  // the method's next calls, in (ts, seq) order
  bool exhausted = false;
  // No call still to be read may begin before this: raised to the earliest call held once
  // half the window is read ahead (a call handed over late comes within that), and to each
  // call decided. A call read later with the same entry time comes later in the store, as
  // in the sort's (ts, seq) order.
  int64_t bound = INT64_MIN;
  int64_t last_truth_ts = INT64_MIN;
  std::vector<Ring<Truth>> pending;  // per join family: ledger calls not decided yet
  size_t waiting = 0;                // in all of them
  std::vector<std::pair<uint64_t, uint64_t>> pairs;  // (ledger seq, method seq), for the order check
  bool any_released = false;
  uint64_t latest = 0;
  SpooledCall read;  // the reader's last call

  // Reads ahead to kReorderWindow calls; throws where a call comes before the bound
  // (farther out of order than the window mends).
  void fill(const std::vector<int32_t>& family_of_seen) {
    while (!exhausted && ahead.size() < kReorderWindow) {
      if (!reader.next(read)) {
        exhausted = true;
        break;
      }
      if (read.family >= family_of_seen.size() || family_of_seen[read.family] < 0) continue;
      if (read.ts == 0) throw NotStreamable("a method's call without an entry time");
      if (read.ts < bound)
        throw NotStreamable("thread " + std::to_string(read.tid) + "'s calls in the method's output are out of time order");
      Held& h = ahead.push_slot();
      h.c = read;
      h.c.family = uint32_t(family_of_seen[read.family]);
      h.args.assign(read.args);
      for (size_t i = ahead.size() - 1; i > 0 && before(ahead.at(i).c, ahead.at(i - 1).c); --i)
        std::swap(ahead.at(i), ahead.at(i - 1));
      if (ahead.size() >= kReorderWindow / 2) bound = std::max(bound, ahead.front().c.ts);
    }
  }
  // No call of the method yet to be decided on this thread begins before this.
  int64_t cursor() const {
    if (exhausted) return ahead.empty() ? INT64_MAX : ahead.front().c.ts;
    return bound;
  }
};

StreamJoin::StreamJoin(LayerScore& score, Setup setup)
    : score_(score), setup_(std::move(setup)),
      scorer_(std::make_unique<PairScorer>(score_, setup_.max_examples, no_buckets_, &devices_)) {}

StreamJoin::~StreamJoin() = default;

StreamJoin::Thread& StreamJoin::thread(int64_t tid) {
  if (last_thread_ && last_thread_->tid == tid) return *last_thread_;
  auto it = threads_.find(tid);
  if (it == threads_.end()) {
    if (threads_.size() >= CallSpool::kMaxThreads) throw NotStreamable("more threads than the join holds at once");
    it = threads_.emplace(tid, std::make_unique<Thread>(tid, setup_.spool->reader(tid))).first;
    it->second->fill(setup_.family_of_seen);
  }
  last_thread_ = it->second.get();
  return *last_thread_;
}

void StreamJoin::add_truth(Truth& t) {
  if (t.ts == 0) throw NotStreamable("a ledger call without an entry time");
  // A window that would wrap around the clock's range, or more families or calls waiting
  // than a thread holds (what a made-up ledger can ask for): sorted instead.
  const int64_t slack = setup_.slack_ns < 0 ? -setup_.slack_ns : setup_.slack_ns;
  if (t.ts < INT64_MIN + slack || t.ts > INT64_MAX - slack - std::max<int64_t>(0, t.dur.value_or(0)))
    throw NotStreamable("a ledger call's window past the clock's range");
  if (t.family >= kMaxFamilies) throw NotStreamable("more call families than the join holds");
  Thread& s = thread(t.tid);
  if (t.ts < s.last_truth_ts) throw NotStreamable("thread " + std::to_string(t.tid) + "'s ledger calls are out of time order");
  s.last_truth_ts = t.ts;
  play_until(s, t.ts - setup_.slack_ns);
  if (t.family >= s.pending.size()) s.pending.resize(t.family + 1);
  Truth& slot = s.pending[t.family].push_slot();
  slot.ts = t.ts, slot.pid = t.pid, slot.tid = t.tid, slot.dur = t.dur, slot.ret = t.ret, slot.device = t.device;
  slot.seq = t.seq, slot.family = t.family;
  slot.name.swap(t.name), slot.device_id.swap(t.device_id), slot.args.swap(t.args);
  if (++s.waiting > kPairsHeld) throw NotStreamable("too many ledger calls of one thread wait for the method's");
  settle(s, slot.family);
  if (s.pairs.size() >= 4096) release_pairs(s, false);
}

// A family's calls whose window ends before every event still to come are missing now (the
// newest among them), so that a family the method never saw holds nothing.
void StreamJoin::settle(Thread& s, uint32_t family) {
  Ring<Truth>& q = s.pending[family];
  const int64_t c = s.cursor();
  while (!q.empty() && q.front().ts + q.front().dur.value_or(0) + setup_.slack_ns < c) {
    missing(q.front());
    q.pop_front();
    --s.waiting;
  }
}

void StreamJoin::play_until(Thread& s, int64_t key) {
  while (!s.ahead.empty() && s.ahead.front().c.ts < key) {
    Held& h = s.ahead.front();
    s.bound = std::max(s.bound, h.c.ts);
    h.c.args = h.args;
    seen(s, h.c);
    s.ahead.pop_front();
    s.fill(setup_.family_of_seen);
  }
}

void StreamJoin::seen(Thread& s, const SpooledCall& e) {
  if (e.family < s.pending.size()) {
    Ring<Truth>& q = s.pending[e.family];
    while (!q.empty()) {
      const Truth& t = q.front();
      if (e.ts < t.ts - setup_.slack_ns) break;  // before the earliest call's window: a phantom
      if (e.ts > t.ts + t.dur.value_or(0) + setup_.slack_ns) {
        missing(t);
        q.pop_front();
        --s.waiting;
        continue;
      }
      matched(s, t, e);
      q.pop_front();
      --s.waiting;
      return;
    }
  }
  phantom(e);
}

void StreamJoin::expected(const Truth& t) {
  ++score_.expected;
  if (t.family >= by_family_.size()) by_family_.resize(t.family + 1);
  ++by_family_[t.family].expected;
  ++truth_bucket(t).expected;
}

BucketTally& StreamJoin::truth_bucket(const Truth& t) {
  if (!last_truth_place_ || std::get<0>(last_truth_ref_) != t.pid || std::get<1>(last_truth_ref_) != t.device ||
      std::get<2>(last_truth_ref_) != t.device_id) {
    last_truth_ref_ = {t.pid, t.device, t.device_id};
    last_truth_place_ = &truth_places_[last_truth_ref_];
    if (truth_places_.size() > kMaxPlaces) throw NotStreamable("more (process, device) places than the join holds");
  }
  return *last_truth_place_;
}

void StreamJoin::missing(const Truth& t) {
  expected(t);
  ++score_.missing;
  ++truth_bucket(t).missing;
  if (wants_example(-1)) {
    std::string d = t.name + " tid " + std::to_string(t.tid) + " ts " + std::to_string(t.ts);
    if (t.ret) d += " ret " + std::to_string(*t.ret);
    example(-1, "missing: " + d);
  }
}

void StreamJoin::matched(Thread& s, const Truth& t, const SpooledCall& e) {
  expected(t);
  ++score_.matched;
  ++by_family_[t.family].matched;
  ++truth_bucket(t).matched;
  Event& a = truth_event_;
  a.name = t.name, a.ts = t.ts, a.dur = t.dur, a.pid = t.pid, a.tid = t.tid, a.ret = t.ret, a.device = t.device;
  a.device_id = t.device_id;
  Event& b = seen_event_;
  b.name = setup_.spool->name(e.name), b.ts = e.ts, b.dur = e.dur, b.pid = e.pid, b.tid = e.tid, b.ret = e.ret;
  b.device = e.device, b.device_id = setup_.spool->device_id(e.device_id);
  scorer_->compare(a, t.args, b, e.args);
  s.pairs.emplace_back(t.seq, e.seq);
}

void StreamJoin::phantom(const SpooledCall& e) {
  const uint32_t f = e.family;
  if (f >= phantoms_.size()) phantoms_.resize(f + 1, 0);
  ++phantoms_[f];
  const DeviceRef place{e.pid, e.device, setup_.spool->device_id(e.device_id)};
  if (!last_phantom_place_ || last_phantom_family_ != f || last_phantom_ref_ != place) {
    last_phantom_family_ = f, last_phantom_ref_ = place;
    last_phantom_place_ = &phantom_places_[{f, place}];
    if (phantom_places_.size() > kMaxPlaces) throw NotStreamable("more (process, device) places than the join holds");
  }
  ++*last_phantom_place_;
  if (wants_example(int32_t(f))) {
    std::string d = setup_.spool->name(e.name) + " tid " + std::to_string(e.tid) + " ts " + std::to_string(e.ts);
    if (e.ret) d += " ret " + std::to_string(*e.ret);
    example(int32_t(f), "phantom: " + d);
  }
}

// The matched pairs of the thread in ledger order, as far as no pending ledger call can
// still come before them: a pair out of the ledger's order is an order violation, as
// Matcher::join counts them.
void StreamJoin::release_pairs(Thread& s, bool all) {
  uint64_t watermark = UINT64_MAX;
  if (!all)
    for (auto& q : s.pending)
      if (!q.empty()) watermark = std::min(watermark, q.front().seq);
  if (!std::is_sorted(s.pairs.begin(), s.pairs.end())) std::sort(s.pairs.begin(), s.pairs.end());
  size_t n = 0;
  for (; n < s.pairs.size() && s.pairs[n].first < watermark; ++n) {
    const uint64_t e = s.pairs[n].second;
    if (s.any_released && e < s.latest) ++score_.order_violations;
    s.latest = s.any_released ? std::max(s.latest, e) : e;
    s.any_released = true;
  }
  s.pairs.erase(s.pairs.begin(), s.pairs.begin() + std::ptrdiff_t(n));
  if (s.pairs.size() >= kPairsHeld) throw NotStreamable("too many pairs wait for a ledger call decided late");
}

bool StreamJoin::wants_example(int32_t family) const {
  const auto it = examples_per_family_.find(family);
  const size_t kept = it == examples_per_family_.end() ? 0 : it->second;
  return kept < setup_.max_examples && (it != examples_per_family_.end() || examples_per_family_.size() < 256);
}

void StreamJoin::example(int32_t family, std::string what) {
  ++examples_per_family_[family];
  examples_.emplace_back(family, std::move(what));
}

void StreamJoin::finish(const BucketContext& buckets, bool attributing, const std::function<bool(uint32_t)>& scored) {
  for (int64_t tid : setup_.spool->threads())  // threads the ledger never named
    if (shard_of(tid, setup_.shards) == setup_.shard) thread(tid);
  std::vector<int64_t> tids;
  for (const auto& [tid, s] : threads_) tids.push_back(tid);
  std::sort(tids.begin(), tids.end());
  for (int64_t tid : tids) {
    Thread& s = *threads_[tid];
    play_until(s, INT64_MAX);
    for (auto& q : s.pending)
      for (; !q.empty(); q.pop_front()) missing(q.front());
    s.waiting = 0;
    release_pairs(s, true);
  }
  for (uint32_t f = 0; f < phantoms_.size(); ++f)
    if (scored(f)) score_.phantom += phantoms_[f];
  for (uint32_t f = 0; f < by_family_.size(); ++f)
    if (by_family_[f].expected) {
      NameScore& n = score_.by_name[setup_.families->name(f)];
      n.expected += by_family_[f].expected, n.matched += by_family_[f].matched;
    }
  if (buckets.labels) {
    for (const auto& [place, tally] : truth_places_) score_.buckets[buckets.truth(event_at(place))].add(tally);
    for (const auto& [key, n] : phantom_places_)
      if (scored(key.first)) score_.buckets[buckets.seen(event_at(key.second), attributing)].phantom += n;
  }
  PairScorer decider(score_, setup_.max_examples, buckets);
  devices_.decide(score_, buckets, decider);
  for (auto& [family, what] : examples_)
    if ((family < 0 || scored(uint32_t(family))) && score_.examples.size() < setup_.max_examples)
      score_.examples.push_back(std::move(what));
  examples_.clear();
}

}  // namespace cudatrace
