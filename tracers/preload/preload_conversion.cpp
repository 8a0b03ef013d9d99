// The shim's output converted while the program runs and settled at its end
// (preload_conversion.h says what is the same as after the run, and what is counted).
#include "tracers/preload/preload_conversion.h"

#include <sys/stat.h>

#include <algorithm>
#include <system_error>

namespace cudatrace::preload {

namespace fs = std::filesystem;

PreloadConversion::PreloadConversion(fs::path dir, const fs::path& events_file, uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes), budget_(max_bytes / sizeof(Record)), out_(events_file), convert_(out_) {
  convert_.use(&live_tables_, nullptr);
}

PreloadConversion::~PreloadConversion() = default;

void PreloadConversion::poll() {
  list_live();
  for (auto& [key, f] : files_) read_live(*f);
}

// New thread files (a thread or process started since), and tables that grew. The folder
// is the program's: a name that is not ours is passed over, one that cannot be opened is
// not tried again (the end counts it), and no more than kMaxLiveFiles are followed (the
// rest are converted at the end).
void PreloadConversion::list_live() {
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("preload.", 0) != 0 || refused_.count(name)) continue;
    ThreadKey key;
    bool bad = false;
    int64_t pid = 0;
    if (record_file_key(name, key, bad)) {
      if (files_.count(key) || files_.size() >= kMaxLiveFiles) continue;
      auto f = std::make_unique<ThreadFile>(key, it->path());
      if (f->open()) files_.emplace(key, std::move(f));
      else if (refused_.size() < kMaxLiveFiles) refused_.insert(name);
    } else if (!bad && table_pid(name, pid)) {
      const std::string ext = it->path().extension().string();
      if (ext == ".kernels" || ext == ".devices" || ext == ".generic") refresh_table(ext, it->path(), pid);
    }
  }
}

namespace {

// A table read afresh replaces what was known of it; an entry it no longer holds, or holds
// otherwise, may already have named events: counted (the shim only ever adds entries).
template <class Map>
int64_t replace_table(Map& live, Map& fresh) {
  int64_t changed = 0;
  for (const auto& [k, v] : live)
    if (auto it = fresh.find(k); it == fresh.end() || it->second != v) ++changed;
  live.swap(fresh);
  return changed;
}

// Entries known while the program ran that the tables read at its end do not hold as they were.
template <class Tables>
int64_t differing(const Tables& live, const Tables& final_tables) {
  int64_t changed = 0;
  for (const auto& [pid, table] : live) {
    const auto f = final_tables.find(pid);
    for (const auto& [k, v] : table)
      if (f == final_tables.end() || !f->second.count(k) || f->second.at(k) != v) ++changed;
  }
  return changed;
}

}  // namespace

// A table is read again whole when its size or time changed (the shim appends a few lines
// now and then); each reading has the bounds of the end's (per file, per run, entries).
void PreloadConversion::refresh_table(const std::string& ext, const fs::path& path, int64_t pid) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  const uint64_t stamp = uint64_t(st.st_size) * 1000003u ^ uint64_t(st.st_mtim.tv_sec) * 1000000007u ^ uint64_t(st.st_mtim.tv_nsec);
  auto seen = table_sizes_.find(path);
  if (seen == table_sizes_.end()) {
    if (table_sizes_.size() >= kMaxLiveFiles) return;
    seen = table_sizes_.emplace(path, ~stamp).first;
  }
  if (seen->second == stamp) return;
  seen->second = stamp;
  ShimOutput fresh;
  fresh.tables = TableReading(max_bytes_);  // the same bounds as the end's reading
  read_process_table(fresh, ext, path, pid);
  if (ext == ".kernels") loss_.changed_entries += replace_table(live_tables_.kernels[pid], fresh.kernels[pid]);
  else if (ext == ".devices") loss_.changed_entries += replace_table(live_tables_.bus_ids[pid], fresh.bus_ids[pid]);
  else loss_.changed_entries += replace_table(live_tables_.generic_names[pid], fresh.generic_names[pid]);
}

// What the file holds past what was read, within the run's bound and the window's room,
// then converted as far as it can be.
void PreloadConversion::read_live(ThreadFile& f) {
  if (f.changed) return;
  const uint64_t room = ThreadFile::kMaxWindow - std::min<uint64_t>(f.window.size(), ThreadFile::kMaxWindow);
  const uint64_t n = std::min({f.records_now() - f.read_count, room, budget_});
  if (n) budget_ -= f.read(n, true, spans_);
  convert_.convert_window(f);
}

// The end: every file the folder lists is opened (if it was not followed) and read to its
// end, in the order of (pid, tid) as the run's bound is shared out, so that every process's
// span is whole before the records that need it are converted.
void PreloadConversion::settle_files(const ShimOutput& shim) {
  for (const auto& [key, path] : shim.files) {
    auto it = files_.find(key);
    if (it == files_.end()) {
      auto f = std::make_unique<ThreadFile>(key, path);
      if (!f->open()) {
        ++loss_.unreadable;
        continue;
      }
      files_.emplace(key, std::move(f));
    } else if (it->second->path != path || !it->second->still_at_path()) {
      it->second->changed = true;  // replaced under the reader: what was read stays, the new file is not read
    }
  }
  for (auto& [key, f] : files_) {
    if (!shim.files.count(key)) f->changed = true;  // removed while it was followed
    loss_.changed_files += f->changed;
    if (f->changed) continue;
    const uint64_t left = f->records_now() - f->read_count;
    const uint64_t take = std::min(left, budget_);
    loss_.over_bound += int64_t(left - take);
    budget_ -= f->read(take, false, spans_);
  }
}

TracerReport PreloadConversion::finish() {
  ShimOutput shim = read_shim_output(dir_, max_bytes_);
  loss_.changed_entries += differing(live_tables_.kernels, shim.kernels) +
                           differing(live_tables_.bus_ids, shim.bus_ids) +
                           differing(live_tables_.generic_names, shim.generic_names);
  settle_files(shim);
  convert_.use(&shim, &spans_);
  for (auto& [key, f] : files_) {
    convert_.convert_rest(*f);
    convert_.close_file(*f);
  }
  files_.clear();
  out_.close();
  return preload_report(shim, convert_.counts, loss_, max_bytes_);
}

}  // namespace cudatrace::preload
