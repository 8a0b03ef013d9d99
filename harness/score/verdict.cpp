#include "harness/score/verdict.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <optional>

#include "common/cuda_names.h"
#include "common/packed_args.h"

namespace cudatrace {

using json = nlohmann::json;

json unobserved_layers(const Method& m, const TracerReport& report) {
  json out = json::array();
  for (const auto& l : m.layers) {
    if (std::find(report.layers.begin(), report.layers.end(), l) != report.layers.end()) continue;
    std::string reason;
    if (auto it = report.unobserved.find(l); it != report.unobserved.end()) reason = it->second;
    else if (!report.error.empty()) reason = "the tracer failed: " + report.error;
    else reason = "the method reported no " + l + " layer for this program (see the run's notes)";
    out.push_back({{"layer", l}, {"reason", reason}});
  }
  return out;
}


std::string lost_text(const json& loss) {
  std::string lost;
  if (loss.is_object())
    for (const auto& [counter, n] : loss.items())
      if (n.is_number_integer() && n.get<int64_t>() > 0) lost += (lost.empty() ? "" : ", ") + counter + "=" + n.dump();
  return lost;
}

void add_loss(json& total, const json& more) {
  for (const auto& [k, v] : more.items()) {
    if (v.is_number_integer()) total[k] = total.value(k, int64_t(0)) + v.get<int64_t>();
  }
}

std::string share_text(int64_t matched, int64_t total) {
  if (total <= 0 || matched >= total) return "100.0%";
  const int64_t tenths = matched * 1000 / total;  // rounded down: a shortfall never reads whole
  char buf[96];
  std::snprintf(buf, sizeof buf, "%lld.%lld%%", static_cast<long long>(tenths / 10), static_cast<long long>(tenths % 10));
  std::string out = buf;
  if (tenths >= 990)
    out += ", " + std::to_string(total - matched) + " of " + std::to_string(total) + " missing";
  return out;
}

std::string partial_reason(const std::map<std::string, std::string>& partly_unobserved, const json& loss,
                           const std::map<std::string, std::string>& limits, const std::string& layer) {
  if (auto it = partly_unobserved.find(layer); it != partly_unobserved.end()) return it->second;
  if (const std::string lost = lost_text(loss); !lost.empty()) return "the tracer lost events (" + lost + ")";
  if (auto it = limits.find(layer); it != limits.end()) return "what this method cannot see: " + it->second;
  return "";
}


namespace {
// The kernel's own symbol where the method kept it (args.symbol), else its name.
// A grid's blocks so far times one more dimension, held at INT64_MAX where it would overflow
// (a record's numbers are the program's to write).
int64_t grid_product(int64_t a, int64_t b) {
  int64_t out;
  return __builtin_mul_overflow(a, b, &out) ? INT64_MAX : out;
}

// A small integer array's product (a grid's blocks), as MessagePack holds it; 0 where an
// element is no integer, as the JSON reading counts it; nullopt for anything but an array.
std::optional<int64_t> packed_grid_blocks(std::string_view raw) {
  const auto* p = reinterpret_cast<const uint8_t*>(raw.data());
  const auto* end = p + raw.size();
  if (p == end || (*p & 0xf0) != 0x90) return std::nullopt;
  int64_t product = 1;
  for (unsigned n = *p++ & 0x0f; n > 0; --n) {
    if (p == end) return 0;
    const uint8_t b = *p++;
    int64_t v;
    size_t width = 0;
    if (b < 0x80) v = b;
    else if (b >= 0xe0) v = int8_t(b);
    else if (b >= 0xcc && b <= 0xcf) width = size_t(1) << (b - 0xcc);
    else if (b >= 0xd0 && b <= 0xd3) width = size_t(1) << (b - 0xd0);
    else return 0;  // no integer (the rest is not read: the product is 0)
    if (width) {
      if (size_t(end - p) < width) return 0;
      uint64_t u = 0;
      for (size_t i = 0; i < width; ++i) u = u << 8 | p[i];
      p += width;
      v = b >= 0xd0 && width < 8 ? int64_t(u << (64 - 8 * width)) >> (64 - 8 * width) : int64_t(u);
    }
    product = grid_product(product, v);
  }
  return product;
}
}  // namespace

struct FamilyCounter::KernelArgs {
  std::string_view symbol;  // args.symbol, else args.kernel, else the event's name
  int64_t launch = -1, execution = 0;
  std::optional<int64_t> grid_blocks;  // args.grid's product, where it is an array
  int64_t blocks = 1;                  // args.blocks, where it is an integer

  static KernelArgs of(const Event& e) {
    KernelArgs k;
    k.symbol = e.name;
    for (const char* key : {"kernel", "symbol"})  // the symbol wins
      if (auto it = e.args.find(key); it != e.args.end() && it->is_string()) k.symbol = it->get_ref<const std::string&>();
    const auto integer = [&](const char* key, int64_t& into) {
      if (auto it = e.args.find(key); it != e.args.end() && it->is_number_integer()) into = it->get<int64_t>();
    };
    integer("launch", k.launch), integer("execution", k.execution), integer("blocks", k.blocks);
    if (auto grid = e.args.find("grid"); grid != e.args.end() && grid->is_array()) {
      k.grid_blocks = 1;
      for (const auto& d : *grid) *k.grid_blocks = grid_product(*k.grid_blocks, d.is_number_integer() ? d.get<int64_t>() : 0);
    }
    return k;
  }
  static KernelArgs of(const Event& e, std::string_view packed) {
    KernelArgs k;
    k.symbol = e.name;
    bool symbol = false;
    PackedArgsView(packed).each([&](std::string_view key, const PackedValue& v) {
      const bool integer = v.kind == PackedValue::Kind::kInt;
      if (key == "symbol" && v.kind == PackedValue::Kind::kText) k.symbol = v.text, symbol = true;
      else if (key == "kernel" && v.kind == PackedValue::Kind::kText && !symbol) k.symbol = v.text;
      else if (key == "launch" && integer) k.launch = v.integer;
      else if (key == "execution" && integer) k.execution = v.integer;
      else if (key == "blocks" && integer) k.blocks = v.integer;
      else if (key == "grid") k.grid_blocks = packed_grid_blocks(v.raw);
    });
    return k;
  }
};
namespace {
}  // namespace

void count_families(const std::vector<Event>& events, FamilyCounts& into) {
  FamilyCounter counter(into);
  for (const auto& e : events) counter.add(e);
}

// Asked of every call a tracer writes with packed args: compared as Event::is_meta is.
bool FamilyCounter::reads_args(const Event& e) {
  const std::string_view l = e.layer;
  return l == std::string_view(layer::kGpuActivity) || l == std::string_view(layer::kDevice);
}

const std::string& FamilyCounter::family_of_kernel(std::string_view symbol) {
  if (const auto it = kernel_families_.find(symbol); it != kernel_families_.end()) return it->second;
  if (kernel_families_.size() >= (size_t(1) << 16)) kernel_families_.clear();  // a bound: folded anew past it
  std::string name(symbol);
  std::string family = kernel_family(name);
  return kernel_families_.emplace(std::move(name), std::move(family)).first->second;
}

void FamilyCounter::add(const Event& e, std::string_view packed) {
  if (reads_args(e)) count_kernel(e, KernelArgs::of(e, packed));
  else add(e);
}

void FamilyCounter::count_kernel(const Event& e, const KernelArgs& a) {
  const std::string& k = family_of_kernel(a.symbol);
  if (e.layer == layer::kGpuActivity) {
    ++into_[e.layer][k];
    if (a.grid_blocks) into_[kActivityBlocks][k] += *a.grid_blocks;
    else into_[kActivityBlocks][k] += 1;
    return;
  }
  const auto [at, first] = last_run_.try_emplace(e.pid);
  Run& last = at->second;
  if (first || last.launch != a.launch || last.execution != a.execution || last.family != k) {
    last.launch = a.launch, last.execution = a.execution, last.family = k;
    ++into_[e.layer][k];
    // Once per launch: a method that writes an event per block repeats the grid in each.
    if (a.grid_blocks) into_[kDeviceGridBlocks][k] += *a.grid_blocks;
  }
  // Blocks: an event per block, or a launch's args.blocks counted on the GPU.
  into_[kDeviceBlocks][k] += a.blocks;
}

void FamilyCounter::add(const Event& e) {
  static const std::string runtime = layer::kRuntime, driver = layer::kDriver;
  const bool is_runtime = e.layer == runtime;
  if (is_runtime || e.layer == driver) {
    auto& slots = is_runtime ? runtime_slots_ : driver_slots_;
    if (auto it = slots.find(e.name); it != slots.end()) {
      if (it->second) ++*it->second;
      return;
    }
    // cudart's plumbing (no program calls it) counts nowhere.
    int64_t* slot = is_runtime_internal(e.name) ? nullptr : &into_[e.layer][canonical_name(e.name)];
    if (slots.size() < 4096) slots.emplace(e.name, slot);
    if (slot) ++*slot;
  } else if (reads_args(e)) {
    count_kernel(e, KernelArgs::of(e));
  } else if (e.layer == layer::kSyscall) {
    ++into_[e.layer][e.name];
  }
}

namespace {

const char* kReferenceMethod = "cupti";

// Calls that exist only because CUPTI is attached: cudart asks the driver for a kernel's
// name before each launch when a CUPTI subscriber wants it for its callbacks: the cupti
// method records one per launch, and uprobe, which probes every libcuda function, none
// (tracers/cupti/README.md). Left out of the reference, and said so: another method cannot
// miss what happens only under CUPTI.
const std::map<std::string, std::string> kMadeForCupti = {
    {"cuKernelGetName", "cudart asks it once per launch only while CUPTI is attached, to name the launch for "
                        "CUPTI's callbacks"}};

// The layer whose counts serve as the reference for `l`: kernel runs are one quantity,
// whether a method sees them as activity records or device blocks.
std::string reference_layer(const std::string& l) { return l == layer::kDevice ? layer::kGpuActivity : l; }

}  // namespace

namespace {

// The per-(process, device) part of a command's verdict: against CUPTI's run, per process.
json per_device_section(const std::vector<MethodView>& methods, const MethodView* cupti) {
  if (!cupti || !cupti->processes)
    return {{"reference", nullptr},
            {"why", "no cupti run that observed a layer: there is no reference per process and device"}};
  PerDeviceInput ref{cupti->method, std::max(1, cupti->reps),
                     std::vector<std::string>(cupti->observed.begin(), cupti->observed.end()), cupti->processes};
  std::vector<PerDeviceInput> inputs;
  for (const auto& m : methods) {
    if (!m.processes) continue;
    std::vector<std::string> layers;
    for (const auto& l : m.intended)
      if (m.observed.count(l) && l != layer::kSyscall) layers.push_back(l);
    inputs.push_back({m.method, std::max(1, m.reps), layers, m.processes});
  }
  std::set<std::string> left_out;
  for (const auto& [f, why] : kMadeForCupti) left_out.insert(f);
  json out = per_device_verdict(ref, inputs, {{layer::kDevice, layer::kGpuActivity}}, left_out);
  // Why a method's rows name no device: its own word (Method::devices).
  json not_named = json::object();
  for (const auto& m : methods)
    if (const Method* method = find_method(m.method))
      for (const auto& [l, d] : method->devices)
        if (!d.named) not_named[m.method][l] = d.how;
  out["devices_not_named"] = not_named;
  return out;
}

}  // namespace

namespace {

// Per kernel, over a method's repetitions: (runs, blocks) in one counts table.
std::map<std::string, std::pair<int64_t, int64_t>> runs_and_blocks(const MethodView& v, const char* runs_layer,
                                                                   const char* blocks_layer) {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  const int reps = std::max(1, v.reps);
  if (auto r = v.counts.find(runs_layer); r != v.counts.end())
    for (const auto& [k, n] : r->second) out[k].first += n / reps;
  if (auto b = v.counts.find(blocks_layer); b != v.counts.end())
    for (const auto& [k, n] : b->second) out[k].second += n / reps;
  return out;
}

}  // namespace

// The device layer's blocks, kernel by kernel, against CUPTI's run (a separate run, whose
// kernels and grids may be chosen anew: an autotuner, an input-dependent grid) and, where the
// method's records carry their grids, against what its own launches asked for (the same run:
// a shortfall there is the method's own).
nlohmann::json compare_blocks(const MethodView& cupti, const MethodView& m) {
  const auto ref = runs_and_blocks(cupti, layer::kGpuActivity, kActivityBlocks);
  const auto seen = runs_and_blocks(m, layer::kDevice, kDeviceBlocks);
  const auto asked = runs_and_blocks(m, layer::kDevice, kDeviceGridBlocks);
  int64_t ref_blocks = 0, seen_blocks = 0, asked_blocks = 0;
  for (const auto& [k, rb] : ref) ref_blocks += rb.second;
  for (const auto& [k, rb] : seen) seen_blocks += rb.second;
  for (const auto& [k, rb] : asked) asked_blocks += rb.second;
  nlohmann::json out = {{"reference", ref_blocks}, {"seen", seen_blocks}};
  const bool has_grids = m.counts.count(kDeviceGridBlocks) > 0;
  if (has_grids) out["launched"] = asked_blocks;  // the grids of the method's own launches
  std::set<std::string> kernels;
  for (const auto& [k, rb] : ref) kernels.insert(k);
  for (const auto& [k, rb] : seen) kernels.insert(k);
  nlohmann::json differing = nlohmann::json::array();
  int64_t other_grids = 0, other_kernels = 0, own_short = 0, own_over = 0;
  for (const auto& k : kernels) {
    const auto r = ref.count(k) ? ref.at(k) : std::pair<int64_t, int64_t>{0, 0};
    const auto s = seen.count(k) ? seen.at(k) : std::pair<int64_t, int64_t>{0, 0};
    const int64_t launched = asked.count(k) ? asked.at(k).second : 0;
    if (has_grids && s.second < launched) ++own_short;
    if (has_grids && s.second > launched) ++own_over;
    if (r.second == s.second) continue;
    const bool both_ran = r.first > 0 && s.first > 0;
    (both_ran ? other_grids : other_kernels) += 1;
    if (differing.size() < 8)
      differing.push_back({{"kernel", k}, {"runs_reference", r.first}, {"runs_seen", s.first},
                           {"blocks_reference", r.second}, {"blocks_seen", s.second},
                           {"blocks_launched", has_grids ? nlohmann::json(launched) : nlohmann::json(nullptr)}});
  }
  out["kernels_differing"] = differing;
  out["own_short_kernels"] = own_short;
  if (ref_blocks == seen_blocks && own_short == 0 && own_over == 0) return out;
  std::string why;
  if (has_grids && own_short == 0 && own_over == 0)
    why = "the method counted every block its own launches asked for; ";
  if (own_short > 0)
    why += "the method counted fewer blocks than its own launches asked for in " + std::to_string(own_short) +
           " kernel(s): its own loss; ";
  if (own_over > 0)
    why += "the method counted more blocks than its own launches asked for in " + std::to_string(own_over) +
           " kernel(s); ";
  if (other_grids) why += std::to_string(other_grids) + " kernel(s) ran in both runs with other block totals";
  if (other_grids && other_kernels) why += ", and ";
  if (other_kernels) why += std::to_string(other_kernels) + " kernel(s) ran in one run only";
  if (other_grids || other_kernels)
    why += " (CUPTI's is a separate run: an autotuner, or grids chosen from the input, may pick other kernels "
           "and grids in each)";
  out["why"] = why;
  return out;
}

json command_verdict(const std::vector<MethodView>& methods) {
  std::set<std::string> layers;
  for (const auto& m : methods)
    for (const auto& l : m.intended) layers.insert(l);

  const MethodView* cupti = nullptr;
  for (const auto& m : methods)
    if (m.method == kReferenceMethod && m.ran_ok && !m.observed.empty()) cupti = &m;

  json reference = json::object(), coverage = json::array(), families = json::object();
  for (const auto& l : layers) {
    const std::string rl = reference_layer(l);
    std::map<std::string, int64_t> ref;
    std::string source;
    json not_counted = json::object();
    if (cupti && cupti->observed.count(rl) && l != layer::kSyscall) {
      auto it = cupti->counts.find(rl);
      if (it != cupti->counts.end()) ref = it->second;
      source = rl == layer::kGpuActivity ? "cupti: CUPTI's kernel activity records (kernel runs)"
                                         : "cupti: CUPTI's " + rl + " API callbacks";
      // Per repetition, so that methods with other repetition counts compare alike.
      for (auto& [f, n] : ref) n /= std::max(1, cupti->reps);
      for (const auto& [f, why] : kMadeForCupti)
        if (auto it = ref.find(f); it != ref.end()) {
          not_counted[f] = {{"calls", it->second}, {"why", why}};
          ref.erase(it);
        }
    } else {
      source = "no cupti run: the most any method saw of each family (a union; it can hide what all missed)";
      for (const auto& m : methods) {
        if (!m.observed.count(l) && !m.observed.count(rl)) continue;
        for (const std::string& ml : {l, rl}) {
          auto it = m.counts.find(ml);
          if (it == m.counts.end() || !m.observed.count(ml)) continue;
          for (const auto& [f, n] : it->second) ref[f] = std::max(ref[f], n / std::max(1, m.reps));
        }
      }
    }
    int64_t total = 0;
    for (const auto& [f, n] : ref) total += n;
    reference[l] = {{"source", source}, {"total", total}, {"families", ref.size()}};
    if (!not_counted.empty()) reference[l]["not_counted"] = not_counted;

    json& fam = families[l] = json::object();
    for (const auto& [f, n] : ref) fam[f]["reference"] = n;
    for (const auto& m : methods) {
      if (std::find(m.intended.begin(), m.intended.end(), l) == m.intended.end()) continue;
      json row = {{"method", m.method}, {"layer", l}};
      if (!m.observed.count(l)) {
        auto r = m.unobserved.find(l);
        row["status"] = "not observed";
        row["reason"] = r != m.unobserved.end() ? r->second : (m.ran_ok ? "no reason given" : "the method's runs failed");
        row["coverage"] = nullptr;
        // CUPTI's callbacks saw no call of the layer (a driver-API program has no runtime
        // calls): the method missed nothing, whatever it could not have seen. A union
        // reference of 0 says no such thing: every method may have been blind to it.
        if (total == 0 && cupti && cupti->observed.count(rl) && m.ran_ok) {
          row["status"] = "nothing to see";
          row["seen"] = row["matched"] = row["reference"] = 0;
          row["missed_families"] = json::array();
          row["why"] = "CUPTI saw no call of this layer; nor could this method have: " + row["reason"].get<std::string>();
        }
        coverage.push_back(row);
        continue;
      }
      std::map<std::string, int64_t> seen;
      if (auto it = m.counts.find(l); it != m.counts.end())
        for (const auto& [f, n] : it->second) seen[f] = n / std::max(1, m.reps);
      const bool kernels = l == layer::kGpuActivity || l == layer::kDevice;
      const int64_t joined = kernels ? join_cut_kernel_families(ref, seen) : 0;
      int64_t covered = 0, extra = 0, seen_total = 0;
      json missed = json::array();
      for (const auto& [f, n] : ref) {
        const int64_t s = seen.count(f) ? seen[f] : 0;
        covered += std::min(s, n);
        if (s == 0 && n > 0) missed.push_back(f);
      }
      for (const auto& [f, s] : seen) {
        seen_total += s;
        extra += std::max<int64_t>(0, s - (ref.count(f) ? ref[f] : 0));
        fam[f][m.method] = s;
      }
      // A family the reference has and this method never saw is a 0 in its column, not a
      // gap that would hide the disagreement.
      for (const auto& [f, n] : ref)
        if (!seen.count(f)) fam[f][m.method] = 0;
      row["seen"] = seen_total;
      row["matched"] = covered;
      row["reference"] = total;
      // The device layer's blocks against the grids of CUPTI's kernel records, where both exist.
      if (l == layer::kDevice && cupti && cupti->counts.count(kActivityBlocks) && m.counts.count(kDeviceBlocks))
        row["blocks"] = compare_blocks(*cupti, m);
      row["only_it_saw"] = extra;
      if (joined > 0) row["kernels_joined_by_name_prefix"] = joined;
      row["missed_families"] = missed;
      if (total == 0) {
        row["coverage"] = nullptr;
        row["status"] = seen_total ? "nothing in the reference" : "nothing to see";
      } else {
        row["coverage"] = double(covered) / double(total);
        row["status"] = covered == total ? "complete" : covered == 0 ? "blind" : "partial";
      }
      // A method that lost events is never complete: the reference may be the union of what
      // the methods kept, or CUPTI's own run, and neither can vouch for what this one lost.
      // Nor is one that names a part of the layer it cannot see (cuBLAS's own cudart): where
      // the reference is the union of what the methods kept, no method saw that part either.
      if (row["status"] == "complete" && m.partly_unobserved.count(l)) row["status"] = "partly observed";
      const LossTotals lost = loss_totals(m.loss, m.method);
      row["lost"] = lost.events;
      if (!lost.other.empty()) row["lost_other"] = lost.other;  // files, bytes, ...: never added to events
      if (lost.any() && (row["status"] == "complete" || row["status"] == "nothing to see" ||
                       row["status"] == "nothing in the reference"))
        row["status"] = "lost events";
      // Every launch seen, yet fewer blocks than those launches asked for: not complete.
      if (row["status"] == "complete" && row.contains("blocks") && row["blocks"].value("own_short_kernels", 0) > 0) {
        row["status"] = "partial";
        row["why"] = "fewer blocks counted than its own launches' grids asked for (blocks.kernels_differing)";
      }
      // Less than all of it: the reason travels with the number.
      if (m.partly_unobserved.count(l) || (total > 0 && covered < total) || lost.any()) {
        const std::string why = partial_reason(m.partly_unobserved, m.loss, m.limits, l);
        row["why"] = why.empty() ? "the method names no limit for this layer (Method::limits)" : why;
      }
      coverage.push_back(row);
    }
  }
  json verdict = {{"reference", reference}, {"coverage", coverage}, {"families", families}};
  verdict["per_device"] = per_device_section(methods, cupti);
  return verdict;
}

namespace {
// `s` left-aligned in `width` columns (a reason may be longer than any line buffer).
std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s;
}
}  // namespace

std::string verdict_text(const json& verdict) {
  std::string out;
  char line[4096];
  out += "\nwhat each method saw of the command (reference per layer):\n";
  for (const auto& [layer, ref] : verdict["reference"].items()) {
    std::snprintf(line, sizeof line, "  %-12s %lld from %s\n", layer.c_str(),
                  static_cast<long long>(ref["total"].get<int64_t>()), ref["source"].get<std::string>().c_str());
    out += line;
    // Held by name: items() of the temporary value() returns would outlive it.
    const json not_counted = ref.value("not_counted", json::object());
    for (const auto& [family, n] : not_counted.items()) {
      std::snprintf(line, sizeof line, "  %-12s not counted: %lld %s (%s)\n", "",
                    static_cast<long long>(n["calls"].get<int64_t>()), family.c_str(), n["why"].get<std::string>().c_str());
      out += line;
    }
  }
  for (const auto& row : verdict["coverage"]) {
    std::string detail;
    if (row["status"] == "not observed") {
      detail = "NOT OBSERVED: " + row["reason"].get<std::string>();
    } else {
      char buf[160];
      if (row["coverage"].is_null())
        std::snprintf(buf, sizeof buf, "%s (%lld seen)", row["status"].get<std::string>().c_str(),
                      static_cast<long long>(row["seen"].get<int64_t>()));
      else
        // What it matched of the reference (never more than all of it), and apart from
        // that what only this method saw: one share, one count, never mixed.
        std::snprintf(buf, sizeof buf, "%s: matched %lld of the reference's %lld (%s)",
                      row["status"].get<std::string>().c_str(), static_cast<long long>(row["matched"].get<int64_t>()),
                      static_cast<long long>(row["reference"].get<int64_t>()),
                      share_text(row["matched"].get<int64_t>(), row["reference"].get<int64_t>()).c_str());
      detail = buf;
      if (row.contains("blocks")) {
        detail += "; blocks " + std::to_string(row["blocks"]["seen"].get<int64_t>()) + " of " +
                  std::to_string(row["blocks"]["reference"].get<int64_t>()) + " in CUPTI's kernel records";
        if (row["blocks"].contains("why")) detail += " (" + row["blocks"]["why"].get<std::string>() + ")";
      }
      LossTotals lost;
      lost.events = row.value("lost", int64_t(0));
      if (row.contains("lost_other")) lost.other = row["lost_other"].get<std::map<std::string, int64_t>>();
      if (lost.any()) detail += "; LOST " + lost.text();
      if (const int64_t only = row.value("only_it_saw", int64_t(0)); only > 0)
        detail += "; besides, " + std::to_string(only) + " only it saw";
      if (!row["missed_families"].empty()) {
        detail += "; missed entirely:";
        size_t shown = 0;
        for (const auto& f : row["missed_families"]) {
          if (++shown > 6) {
            detail += " ... (" + std::to_string(row["missed_families"].size()) + " in all)";
            break;
          }
          detail += " " + f.get<std::string>();
        }
      }
      if (row.contains("why")) detail += "; why: " + row["why"].get<std::string>();
    }
    out += "  " + pad(row["method"].get<std::string>(), 14) + " " + pad(row["layer"].get<std::string>(), 12) + " " +
           detail + "\n";
  }
  // Per process and device: the processes the reference saw, then what fell short.
  const json per_device = verdict.value("per_device", json::object());
  if (per_device.value("reference", json()).is_null()) {
    if (per_device.contains("why")) out += "per process and device: " + per_device["why"].get<std::string>() + "\n";
    return out;
  }
  const json processes = per_device.value("processes", json::array());
  std::set<std::string> places;  // the reference's (process, device) pairs
  for (const auto& row : per_device.value("rows", json::array()))
    if (row.value("reference", int64_t(0)) > 0 && row["device"] != kUnattributed && row["device"] != kAllDevices)
      places.insert(row["process"].get<std::string>() + "|" + row["device"].get<std::string>());
  if (places.size() <= 1) {
    out += "per process and device: one process on one GPU in the reference, as above\n";
    return out;
  }
  out += "per process and device (against cupti's " + std::to_string(processes.size()) + " process(es), matched by " +
         "the devices both used, else by the calls in common, then the order of their first CUDA call):\n";
  const json short_of = per_device.value("short", json::object());
  const json not_named = per_device.value("devices_not_named", json::object());
  std::set<std::string> shown;
  for (const auto& row : per_device.value("rows", json::array())) {
    const std::string key = row["method"].get<std::string>() + "|" + row["layer"].get<std::string>();
    if (!shown.insert(key).second) continue;
    const std::string m = row["method"].get<std::string>(), l = row["layer"].get<std::string>();
    const json lines = short_of.contains(m) && short_of[m].contains(l) ? short_of[m][l] : json::array();
    std::string detail = lines.empty() ? "every process and device complete" : "SHORT";
    size_t n = 0;
    for (const auto& line : lines) {
      if (++n > 4) {
        detail += " ... (" + std::to_string(lines.size()) + " in all)";
        break;
      }
      detail += (n == 1 ? " " : "; ") + line.get<std::string>();
    }
    if (not_named.contains(m) && not_named[m].contains(l))
      detail += "; " + std::string(kUnattributed) + ": " + not_named[m][l].get<std::string>();
    out += "  " + pad(m, 14) + " " + pad(l, 12) + " " + detail + "\n";
  }
  return out;
}

}  // namespace cudatrace
