#include "tracers/strace/strace_parser.h"

#include <cctype>
#include <cstdlib>

#include "tracers/strace/nvidia_ioctl.h"

namespace cudatrace {

namespace {

constexpr const char* kUnfinished = " <unfinished ...>";
constexpr uint64_t kCloneThread = 0x00010000;
constexpr size_t kMaxArgText = 160;

// "1795320939.543289147" -> ns, without going through a double (which loses the ns).
bool parse_seconds(const std::string& s, int64_t& ns) {
  size_t dot = s.find('.');
  if (dot == std::string::npos || dot == 0) return false;
  char* end = nullptr;
  int64_t sec = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + dot) return false;
  std::string frac = s.substr(dot + 1);
  if (frac.empty() || frac.size() > 9) return false;
  for (char c : frac)
    if (!std::isdigit(uint8_t(c))) return false;
  frac.append(9 - frac.size(), '0');
  ns = sec * 1000000000 + std::strtoll(frac.c_str(), nullptr, 10);
  return true;
}

bool parse_number(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  if (s.rfind("0x", 0) == 0) {
    out = int64_t(std::strtoull(s.c_str(), &end, 16));
  } else {
    out = std::strtoll(s.c_str(), &end, 10);
  }
  return end && *end == '\0' && errno == 0;
}

std::string first_word(const std::string& s, size_t from = 0) {
  size_t b = s.find_first_not_of(' ', from);
  if (b == std::string::npos) return "";
  size_t e = s.find(' ', b);
  return s.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

// The first argument as strace -y prints a descriptor: `3</dev/nvidiactl>`.
void decode_fd(const std::string& args, nlohmann::json& out, std::string& path) {
  size_t lt = args.find('<');
  size_t comma = args.find(',');
  if (lt == std::string::npos || (comma != std::string::npos && lt > comma)) return;
  int64_t fd;
  if (!parse_number(args.substr(0, lt), fd)) return;
  size_t gt = args.find('>', lt);
  if (gt == std::string::npos) return;
  out["fd"] = fd;
  path = args.substr(lt + 1, gt - lt - 1);
  out["path"] = path;
}

void decode_ioctl(const std::string& args, nlohmann::json& out) {
  std::string path;
  decode_fd(args, out, path);
  size_t comma = args.find(", ");
  if (comma == std::string::npos) return;
  std::string req = args.substr(comma + 2);
  req = req.substr(0, req.find(','));
  int64_t code;
  if (!parse_number(req, code)) {
    out["request"] = req;  // a name strace decoded itself
    return;
  }
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(uint64_t(code)));
  out["request_code"] = hex;
  std::string name = nvidia_ioctl_name(path, uint64_t(code));
  if (!name.empty()) out["request"] = name;
  if (is_nvidia_device(path)) out["nvidia"] = true;
}

// Where the argument list ends and the result begins: the last ")  = " (strace pads
// short calls with spaces before "="). Returns false when the line has no result.
bool split_result(const std::string& s, size_t from, size_t& args_end, size_t& tail_begin) {
  size_t pos = s.size();
  while (pos != std::string::npos && pos > from) {
    pos = s.rfind(" = ", pos - 1);
    if (pos == std::string::npos || pos < from) return false;
    size_t j = pos;
    while (j > from && s[j - 1] == ' ') --j;
    if (j > from && s[j - 1] == ')') {
      args_end = j - 1;
      tail_begin = pos + 3;
      return true;
    }
  }
  return false;
}

}  // namespace

int64_t StraceParser::tgid_of(int64_t tid) {
  for (int hops = 0; hops < 64; ++hops) {
    auto it = tgid_.find(tid);
    if (it == tgid_.end() || it->second == tid) return tid;
    tid = it->second;
  }
  return tid;
}

void StraceParser::note_clone(int64_t parent_tid, const std::string& n, std::optional<int64_t> ret,
                              const std::string& args) {
  if (!ret || *ret <= 0) return;
  if (n != "clone" && n != "clone3" && n != "fork" && n != "vfork") return;
  uint64_t flags = 0;
  if (size_t f = args.find("flags="); f != std::string::npos) flags = std::strtoull(args.c_str() + f + 6, nullptr, 0);
  tgid_[*ret] = (flags & kCloneThread) ? parent_tid : *ret;
  release(*ret);
}

void StraceParser::emit(Event&& e) {
  if (e.tid == first_tid_ || tgid_.count(e.tid)) {
    e.pid = tgid_of(e.tid);
    sink_(std::move(e));
    return;
  }
  const int64_t tid = e.tid;
  waiting_[tid].push_back(std::move(e));
  if (++waiting_total_ > max_waiting_) {
    // Its clone is too late to wait for: a process of its own, as far as we can tell.
    stats_.process_unknown += int64_t(waiting_[tid].size());
    tgid_[tid] = tid;
    release(tid);
  }
}

// A thread's waiting events, now that its process is known (or taken to be its own).
void StraceParser::release(int64_t tid) {
  auto it = waiting_.find(tid);
  if (it == waiting_.end()) return;
  std::vector<Event> events = std::move(it->second);
  waiting_.erase(it);
  waiting_total_ -= events.size();
  const int64_t pid = tgid_of(tid);
  for (Event& e : events) {
    e.pid = pid;
    sink_(std::move(e));
  }
}

void StraceParser::complete(Event& e, const std::string& args, const std::string& tail) {
  std::string ret = first_word(tail);
  int64_t value;
  if (ret != "?" && parse_number(ret, value)) {
    e.ret = value;
    std::string err = first_word(tail, tail.find(ret) + ret.size());
    if (value < 0 && err.size() > 1 && err[0] == 'E') e.args["errno"] = err;
  }
  if (size_t lt = tail.rfind('<'); lt != std::string::npos && tail.back() == '>') {
    int64_t dur;
    if (parse_seconds(tail.substr(lt + 1, tail.size() - lt - 2), dur)) e.dur = dur;
  }
  if (e.name == "ioctl") {
    decode_ioctl(args, e.args);
  } else {
    std::string path;
    decode_fd(args, e.args, path);
    e.args["text"] = args.size() > kMaxArgText ? args.substr(0, kMaxArgText) + "..." : args;
  }
}

// The call goes out first, then the thread or process it made (which may have waited).
void StraceParser::complete_and_emit(Event&& e, const std::string& args, const std::string& tail) {
  complete(e, args, tail);
  const int64_t parent = e.tid;
  const std::string name = e.name;
  const std::optional<int64_t> ret = e.ret;
  emit(std::move(e));
  note_clone(parent, name, ret, args);
}

void StraceParser::feed(const std::string& raw) {
  ++stats_.lines;
  std::string line = raw;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  auto unparsed = [&] {
    ++stats_.unparsed;
    if (stats_.unparsed_examples.size() < 5) stats_.unparsed_examples.push_back("line " + std::to_string(stats_.lines) + ": " + line.substr(0, 200));
  };

  size_t p = 0;
  while (p < line.size() && std::isdigit(uint8_t(line[p]))) ++p;
  if (p == 0) return unparsed();
  const int64_t tid = std::strtoll(line.c_str(), nullptr, 10);
  if (first_tid_ == 0) first_tid_ = tid;
  size_t ts_begin = line.find_first_not_of(' ', p);
  if (ts_begin == std::string::npos) return unparsed();
  size_t ts_end = line.find(' ', ts_begin);
  int64_t real_ns;
  if (ts_end == std::string::npos || !parse_seconds(line.substr(ts_begin, ts_end - ts_begin), real_ns))
    return unparsed();
  const int64_t ts = real_ns - offset_;
  std::string rest = line.substr(ts_end + 1);

  if (rest.rfind("--- ", 0) == 0) {
    ++stats_.signals;
    return;
  }
  if (rest.rfind("+++ ", 0) == 0) return;  // the thread exited or was killed

  if (rest.rfind("<... ", 0) == 0) {
    size_t r = rest.find(" resumed>");
    if (r == std::string::npos) return unparsed();
    std::string name = rest.substr(5, r - 5);
    auto it = pending_.find(tid);
    if (it == pending_.end() || it->second.event.name != name) {
      ++stats_.orphan_resumed;
      return;
    }
    std::string after = rest.substr(r + 9);
    size_t args_end, tail_begin;
    if (!split_result(after, 0, args_end, tail_begin)) return unparsed();
    Event e = std::move(it->second.event);
    std::string args = it->second.args_head + after.substr(0, args_end);
    std::string tail = after.substr(tail_begin);
    pending_.erase(it);
    complete_and_emit(std::move(e), args, tail);
    return;
  }

  size_t paren = rest.find('(');
  if (paren == std::string::npos || paren == 0) return unparsed();
  for (size_t i = 0; i < paren; ++i)
    if (!std::isalnum(uint8_t(rest[i])) && rest[i] != '_') return unparsed();

  Event e;
  e.layer = layer::kSyscall;
  e.name = rest.substr(0, paren);
  e.ts = ts;
  e.tid = tid;
  ++stats_.syscalls;

  const size_t unfinished = rest.rfind(kUnfinished);
  if (unfinished != std::string::npos && unfinished + std::char_traits<char>::length(kUnfinished) == rest.size()) {
    if (auto old = pending_.find(tid); old != pending_.end()) {
      ++stats_.unfinished_at_end;  // never resumed: out as it is, without a result
      emit(std::move(old->second.event));
      pending_.erase(old);
    }
    pending_[tid] = Pending{std::move(e), rest.substr(paren + 1, unfinished - paren - 1)};
    return;
  }
  size_t args_end, tail_begin;
  if (!split_result(rest, paren, args_end, tail_begin)) {
    --stats_.syscalls;
    return unparsed();
  }
  complete_and_emit(std::move(e), rest.substr(paren + 1, args_end - paren - 1), rest.substr(tail_begin));
}

void StraceParser::finish() {
  stats_.unfinished_at_end += int64_t(pending_.size());
  for (auto& [tid, p] : pending_) emit(std::move(p.event));
  pending_.clear();
  // What still waits had no clone we saw: each thread is taken as its own process.
  while (!waiting_.empty()) {
    const int64_t tid = waiting_.begin()->first;
    if (!tgid_.count(tid)) tgid_[tid] = tid;
    release(tid);
  }
}

}  // namespace cudatrace
