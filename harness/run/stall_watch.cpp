#include "harness/run/stall_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>

#include "common/outside_text.h"

namespace cudatrace {

namespace {

// At most `max` bytes of a /proc file (they have no size to trust), or nullopt.
std::optional<std::string> read_small(const std::string& path, size_t max) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string out(max, '\0');
  size_t got = 0;
  while (got < max) {
    const ssize_t n = read(fd, out.data() + got, max - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  close(fd);
  out.resize(got);
  return out;
}

std::optional<pid_t> as_id(std::string_view s) {
  pid_t v = 0;
  if (s.empty() || s.size() > 10) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

// "0", "0.03", "0.5", "2", "1.5", "12": seconds for a person.
std::string seconds(double s) {
  char buf[32];
  if (s < 0.005) return "0";
  std::snprintf(buf, sizeof buf, s < 1 ? "%.2f" : s < 10 ? "%.1f" : "%.0f", s);
  std::string out = buf;
  if (out.find('.') != std::string::npos) {
    while (out.back() == '0') out.pop_back();
    if (out.back() == '.') out.pop_back();
  }
  return out;
}

// A name from the kernel for a one-line message: bytes that are not UTF-8, and control
// bytes (a newline would end the line), as \xHH; at most 64 bytes of it.
std::string printable(std::string_view name) {
  std::string s;
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", unsigned(u));
      s += hex;
    } else {
      s += c;
    }
  }
  return shown(s, 64);
}

}  // namespace

std::optional<StatFields> parse_stat(std::string_view line) {
  // "PID (COMM) STATE PPID ..." where COMM may hold anything but NUL: the last ')' ends it.
  const size_t open = line.find('(');
  const size_t close = line.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
  StatFields f;
  f.name = std::string(line.substr(open + 1, close - open - 1));
  std::vector<std::string_view> fields;  // from field 3 (state) on
  size_t i = close + 1;
  while (i < line.size() && fields.size() < 18) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\n')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\n') ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  if (fields.size() < 18 || fields[0].size() != 1) return std::nullopt;
  f.state = fields[0][0];
  const auto number = [](std::string_view s, uint64_t& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
  };
  uint64_t ppid = 0, utime = 0, stime = 0, threads = 0;
  // Fields 4 (ppid), 14 (utime), 15 (stime) and 20 (num_threads), counted from 1 as proc(5) does.
  if (!number(fields[1], ppid) || !number(fields[11], utime) || !number(fields[12], stime) ||
      !number(fields[17], threads))
    return std::nullopt;
  f.ppid = pid_t(ppid);
  f.cpu_ticks = utime + stime;
  f.threads = int(std::min<uint64_t>(threads, 1u << 30));
  return f;
}

std::optional<StatFields> read_stat(pid_t pid) {
  const auto text = read_small("/proc/" + std::to_string(pid) + "/stat", kStatBytes);
  return text ? parse_stat(*text) : std::nullopt;
}

std::string parse_wchan(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty() || text == "0" || text.size() > 256) return "";
  for (const char c : text)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$')) return "";
  return std::string(text);
}

std::string state_word(char state) {
  switch (state) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "in uninterruptible wait";
    case 'T': return "stopped";
    case 't': return "stopped by a tracer";
    case 'Z': return "zombie";
    case 'X': return "dead";
    case 'I': return "idle";
    case 'P': return "parked";
    case 'W': return "waking";
  }
  return std::string("in state ") + (state >= 0x21 && state < 0x7f ? std::string(1, state) : "?");
}

std::optional<ProcessSample> read_process_sample(pid_t pid, bool with_threads, const std::string& proc_root) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  const auto text = read_small(dir + "/stat", kStatBytes);
  const auto stat = text ? parse_stat(*text) : std::nullopt;
  if (!stat) return std::nullopt;
  ProcessSample p;
  p.pid = pid;
  p.name = stat->name;
  p.state = stat->state;
  p.cpu_ticks = stat->cpu_ticks;
  p.threads = stat->threads;
  if (!with_threads) return p;
  if (DIR* d = opendir((dir + "/task").c_str())) {
    while (const dirent* e = readdir(d)) {
      const auto tid = as_id(e->d_name);
      if (!tid) continue;
      if (int(p.thread_states.size()) >= kThreadsReadPerProcess) {
        ++p.threads_not_read;
        continue;
      }
      const std::string task = dir + "/task/" + e->d_name;
      const auto tstat_text = read_small(task + "/stat", kStatBytes);
      const auto tstat = tstat_text ? parse_stat(*tstat_text) : std::nullopt;
      if (!tstat) continue;  // ended between the listing and the read
      const auto wchan = read_small(task + "/wchan", kWchanBytes);
      p.thread_states.push_back({*tid, tstat->state, wchan ? parse_wchan(*wchan) : ""});
    }
    closedir(d);
  }
  std::sort(p.thread_states.begin(), p.thread_states.end(),
            [](const ThreadState& a, const ThreadState& b) { return a.tid < b.tid; });
  return p;
}

TreeSample read_tree_sample(const std::vector<pid_t>& pids, int64_t t_ns, uint64_t output_bytes, bool with_threads,
                            const std::string& proc_root) {
  TreeSample s;
  s.t_ns = t_ns;
  s.output_bytes = output_bytes;
  for (size_t i = 0; i < pids.size() && s.processes.size() < kProcessesSampled; ++i)
    if (auto p = read_process_sample(pids[i], with_threads, proc_root)) s.processes.push_back(std::move(*p));
  std::sort(s.processes.begin(), s.processes.end(),
            [](const ProcessSample& a, const ProcessSample& b) { return a.pid < b.pid; });
  return s;
}

// ---- the judgement ----
// A process is idle while it uses at most a small share of one CPU (StallSettings); the
// run has made no progress since the latest of: a process started or ended, output
// written, a process's CPU time grown beyond its share.

namespace {
constexpr size_t kMaxRecent = 256;  // samples judged (the runner takes 2 a second)
constexpr size_t kMaxKept = 128;    // samples kept for cpu_over: the report window's whole, older ones thinned
constexpr double kKeptPerCover = 64;  // ... spaced at least cover / 64 apart

bool same_processes(const TreeSample& a, const TreeSample& b) {
  if (a.processes.size() != b.processes.size()) return false;
  for (size_t i = 0; i < a.processes.size(); ++i)
    if (a.processes[i].pid != b.processes[i].pid) return false;
  return true;
}
}  // namespace

StallWatch::StallWatch(StallSettings settings) : settings_(settings) {
  if (!(settings_.ticks_per_s > 0)) settings_.ticks_per_s = 100;
}

void StallWatch::add(const TreeSample& s) {
  if (samples_ == 0) progress_ns_ = s.t_ns;  // the start is progress
  if (samples_ > 0 && (!same_processes(s, last_) || s.output_bytes != last_.output_bytes))
    progress_ns_ = s.t_ns;  // output written, or a process started or ended
  std::map<pid_t, int64_t> grew;
  for (const auto& p : s.processes) {
    const auto before = std::find_if(last_.processes.begin(), last_.processes.end(),
                                     [&](const ProcessSample& q) { return q.pid == p.pid; });
    const auto known = cpu_grew_ns_.find(p.pid);
    if (samples_ > 0 && before != last_.processes.end() && p.cpu_ticks > before->cpu_ticks)
      grew[p.pid] = s.t_ns;
    else
      grew[p.pid] = known != cpu_grew_ns_.end() ? known->second : s.t_ns;
  }
  cpu_grew_ns_ = std::move(grew);
  // CPU beyond the small share over any recent window: progress, as of the last time that
  // process's CPU time grew.
  const int64_t oldest = s.t_ns - int64_t(settings_.activity_window_s * 1e9);
  for (auto it = recent_.rbegin(); it != recent_.rend() && it->t_ns >= oldest; ++it) {
    const double dt = double(s.t_ns - it->t_ns) / 1e9;
    const double budget_ticks = (settings_.idle_cpu_slack_s + settings_.idle_cpu_share * dt) * settings_.ticks_per_s;
    for (const auto& p : s.processes) {
      const auto then = it->ticks.find(p.pid);
      if (then != it->ticks.end() && p.cpu_ticks > then->second && double(p.cpu_ticks - then->second) > budget_ticks)
        progress_ns_ = std::max(progress_ns_, cpu_grew_ns_[p.pid]);
    }
  }
  last_ = s;
  ++samples_;
  keep(s);
}

void StallWatch::keep(const TreeSample& s) {
  Kept k{s.t_ns, {}};
  for (const auto& p : s.processes) k.ticks.emplace(p.pid, p.cpu_ticks);
  recent_.push_back(k);
  const int64_t oldest = s.t_ns - int64_t(settings_.activity_window_s * 1e9);
  while (!recent_.empty() && (recent_.front().t_ns < oldest || recent_.size() > kMaxRecent)) recent_.pop_front();
  const double cover_s = std::max(settings_.report_window_s, settings_.stall_timeout_s);
  const auto spacing = int64_t(cover_s / kKeptPerCover * 1e9);
  // The latest sample is always kept; the one before it only when far enough from its own predecessor.
  if (history_.size() >= 2 && s.t_ns - history_[history_.size() - 2].t_ns < spacing)
    history_.back() = std::move(k);
  else
    history_.push_back(std::move(k));
  if (history_.size() <= kMaxKept) return;
  // Older than the window: every other one goes (the first stays), so that a long run's
  // "since" keeps a coarser grain and the memory stays bounded.
  const int64_t recent_from = s.t_ns - int64_t(cover_s * 1e9);
  std::deque<Kept> thinned;
  size_t old_index = 0;
  for (auto& e : history_) {
    if (e.t_ns < recent_from && old_index++ % 2 == 1) continue;
    thinned.push_back(std::move(e));
  }
  history_ = std::move(thinned);
}

std::optional<StallWatch::CpuOver> StallWatch::cpu_over(pid_t pid, double window_s) const {
  const auto now = std::find_if(last_.processes.begin(), last_.processes.end(),
                                [&](const ProcessSample& p) { return p.pid == pid; });
  if (samples_ == 0 || now == last_.processes.end()) return std::nullopt;
  const int64_t from = last_.t_ns - int64_t(window_s * 1e9);
  const Kept* base = nullptr;
  for (const auto& k : history_) {  // oldest first: the latest at or before `from`, else the oldest with pid
    if (!k.ticks.count(pid)) continue;
    if (!base || k.t_ns <= from) base = &k;
    if (k.t_ns >= from) break;
  }
  if (!base) return CpuOver{0, 0};
  const uint64_t before = base->ticks.at(pid);
  return CpuOver{double(now->cpu_ticks > before ? now->cpu_ticks - before : 0) / settings_.ticks_per_s,
                 double(last_.t_ns - base->t_ns) / 1e9};
}

std::string describe_process_line(const ProcessSample& p, const std::optional<StallWatch::CpuOver>& cpu) {
  std::string s = "pid " + std::to_string(p.pid) + " " + printable(p.name) + ": ";
  std::vector<std::string> parts;
  if (!p.thread_states.empty()) {
    std::map<std::pair<char, std::string>, int> groups;
    for (const auto& t : p.thread_states) ++groups[{t.state, t.wchan}];
    std::vector<std::pair<int, std::string>> counted;
    for (const auto& [key, n] : groups)
      counted.push_back({n, std::to_string(n) + (n == 1 ? " thread " : " threads ") + state_word(key.first) +
                                (key.second.empty() ? "" : " in " + printable(key.second))});
    std::stable_sort(counted.begin(), counted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& c : counted) parts.push_back(c.second);
    if (p.threads_not_read) parts.push_back(std::to_string(p.threads_not_read) + " more threads not read");
  } else {
    parts.push_back(state_word(p.state) + ", " + std::to_string(p.threads) + (p.threads == 1 ? " thread" : " threads"));
  }
  if (cpu && cpu->window_s > 0)
    parts.push_back(seconds(cpu->cpu_s) + " s CPU in the last " + seconds(cpu->window_s) + " s");
  else
    parts.push_back("CPU not sampled over a window yet");
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s;
}

std::string join_process_lines(const std::vector<std::string>& lines, size_t max) {
  std::string s;
  for (size_t i = 0; i < lines.size() && i < max; ++i) s += (i ? "; " : "") + lines[i];
  if (lines.size() > max) s += "; and " + std::to_string(lines.size() - max) + " more processes (run.json's stall)";
  return s;
}

StallVerdict judge_stall(const StallWatch& watch, const TreeSample& final, double window_s) {
  StallVerdict v;
  v.idle_s = watch.empty() ? 0 : watch.idle_s();
  v.since_s = double(watch.progress_ns()) / 1e9;
  v.window_s = window_s;
  v.stalled = !watch.empty() && (watch.stall_timeout_reached() || v.idle_s >= kStalledAtLeast_s);
  nlohmann::json processes = nlohmann::json::array();
  double busiest = 0;
  for (const auto& p : final.processes) {
    const auto cpu = watch.cpu_over(p.pid, window_s);
    if (cpu && cpu->window_s >= 1) busiest = std::max(busiest, cpu->cpu_s / cpu->window_s);
    v.processes.push_back(describe_process_line(p, cpu));
    nlohmann::json threads = nlohmann::json::array();
    std::map<std::pair<char, std::string>, int> groups;
    for (const auto& t : p.thread_states) ++groups[{t.state, t.wchan}];
    for (const auto& [key, n] : groups)
      threads.push_back({{"state", std::string(1, key.first)},
                         {"wchan", key.second.empty() ? nlohmann::json(nullptr) : nlohmann::json(key.second)},
                         {"count", n}});
    processes.push_back({{"pid", p.pid},
                         {"name", p.name},
                         {"state", std::string(1, p.state)},
                         {"threads", p.threads},
                         {"thread_states", threads},
                         {"threads_not_read", p.threads_not_read},
                         {"cpu_s", cpu ? nlohmann::json(cpu->cpu_s) : nlohmann::json(nullptr)},
                         {"cpu_window_s", cpu ? nlohmann::json(cpu->window_s) : nlohmann::json(nullptr)}});
  }
  v.busy = busiest >= 0.5;
  if (watch.empty())
    v.summary = "not sampled (the run ended before the first sample)";
  else if (v.stalled)
    v.summary = "stalled since " + seconds(v.since_s) + " s into the run: no CPU time and no output for its last " +
                seconds(v.idle_s) + " s";
  else if (v.busy)
    v.summary = "busy to the end (spinning: CPU used until it was stopped, no stall)";
  else
    v.summary = "no stall seen: progress " + seconds(v.idle_s) + " s before the end";
  v.json = {{"stalled", v.stalled},
            {"busy", v.busy},
            {"no_progress_s", v.idle_s},
            {"last_progress_s", v.since_s},
            {"summary", v.summary},
            {"cpu_window_s", window_s},
            {"idle_means", {{"cpu_share_of_one_cpu", watch.settings().idle_cpu_share},
                            {"cpu_slack_s", watch.settings().idle_cpu_slack_s},
                            {"no_output", true},
                            {"no_process_started_or_ended", true}}},
            {"stall_timeout_s", watch.settings().stall_timeout_s > 0 ? nlohmann::json(watch.settings().stall_timeout_s)
                                                                     : nlohmann::json(nullptr)},
            {"processes", processes}};
  return v;
}

}  // namespace cudatrace
