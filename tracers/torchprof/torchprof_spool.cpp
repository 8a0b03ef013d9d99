#include "tracers/torchprof/torchprof_spool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/bounded_lines.h"
#include "common/device_id.h"
#include "common/event_io.h"
#include "common/outside_text.h"
#include "common/untrusted_file.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr size_t kMaxStatusBytes = size_t(64) << 10;

}  // namespace

int64_t spool_pid_in(const std::string& name, const std::string& method, const std::string& suffix) {
  const std::string prefix = method + ".";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 10) return -1;
  const auto pid = parse_int64(digits);
  return pid && *pid > 0 ? *pid : -1;
}

namespace {

// The whole of a small file the program wrote, or why not.
bool read_small(const fs::path& file, std::string& text, std::string& why) {
  why.clear();
  uint64_t size = 0;
  const int fd = open_untrusted_fd(file, &why, &size);
  if (fd < 0) return false;
  if (size > kMaxStatusBytes) why = "larger than 64 KiB";
  const bool ok = why.empty();
  if (ok) {
    text.resize(size_t(size));
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += size_t(n);
    }
    text.resize(got);
  }
  close(fd);
  return ok;
}

void read_status(const fs::path& file, SpooledProcess& p, uint64_t& budget, SpoolBounds& bounds) {
  std::string text, why;
  if (budget == 0) {
    p.status_error = "not read: the statuses read before took the " + std::to_string(bounds.max_status_bytes >> 20) +
                     " MiB they may";
    ++bounds.statuses_unread;
    return;
  }
  if (!read_small(file, text, why)) {
    p.status_error = why;
    ++bounds.statuses_unread;  // a process the harness cannot judge: counted, never a clean zero
    return;
  }
  budget -= std::min<uint64_t>(budget, text.size());
  try {
    json j = parse_outside_json(escape_invalid_utf8(text));
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    if (auto ph = j.find("phase"); ph != j.end() && ph->is_string()) p.phase = ph->get<std::string>().substr(0, 64);
    if (auto d = j.find("devices"); d != j.end() && d->is_object())
      for (const auto& [ordinal, bus] : d->items()) {
        const auto n = parse_int64(ordinal);
        if (n && *n >= 0 && *n < 4096 && bus.is_string())
          if (std::string id = normalize_pci_bus_id(bus.get<std::string>()); !id.empty()) p.bus_ids[*n] = id;
      }
    p.status = std::move(j);
  } catch (const std::exception& e) {
    p.status_error = std::string("not a status: ") + shown(e.what(), 120);
    ++bounds.statuses_unread;
  }
}

}  // namespace

SpoolBounds SpoolBounds::for_run(uint64_t run_bytes) {
  SpoolBounds b;
  b.max_status_bytes = std::clamp<uint64_t>(run_bytes >> 10, b.max_status_bytes, uint64_t(1) << 30);
  b.max_names = std::max<size_t>(b.max_names, size_t(b.max_status_bytes >> 10));
  return b;
}

bool phase_profiled(const std::string& phase) {
  return phase == "profiling" || phase == "exported" || phase == "export_failed";
}

std::map<int64_t, SpooledProcess> read_spool(const fs::path& dir, const std::string& method, SpoolBounds* bounds) {
  const auto pid_in = [&method](const std::string& name, const char* suffix) { return spool_pid_in(name, method, suffix); };
  std::map<int64_t, SpooledProcess> out;
  SpoolBounds own;
  SpoolBounds& b = bounds ? *bounds : own;
  uint64_t budget = b.max_status_bytes;
  size_t seen = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    // Past the bound the names are only counted, and that only so far: the count says there
    // were more, the time it takes stays bounded.
    if (++seen > b.max_names) {
      if (++b.names_unread >= int64_t(b.max_names) * 16) break;
      continue;
    }
    const std::string name = it->path().filename().string();
    if (const int64_t pid = pid_in(name, ".status.json"); pid > 0) {
      SpooledProcess& p = out[pid];
      p.pid = pid;
      p.has_status = true;
      read_status(it->path(), p, budget, b);
    } else if (const int64_t pid = pid_in(name, ".json"); pid > 0) {
      out[pid].pid = pid;
      out[pid].trace = name;
      out[pid].trace_tmp = false;
    } else if (const int64_t pid = pid_in(name, ".json.tmp"); pid > 0) {
      SpooledProcess& p = out[pid];
      p.pid = pid;
      if (p.trace.empty()) {  // the finished trace, where both are there, is the one read
        p.trace = name;
        p.trace_tmp = true;
      }
    }
  }
  return out;
}

KinetoLossLines read_kineto_loss_lines(const fs::path& program_stderr, uint64_t max_bytes) {
  KinetoLossLines out;
  if (program_stderr.empty()) return out;
  BoundedLines lines(program_stderr, max_bytes);
  if (!lines.is_open()) {
    out.unread = lines.why();
    return out;
  }
  std::string line;
  while (lines.next(line)) {
    // CuptiActivityApi.cpp: "Exceeded max GPU buffer count (N >= M) - terminating tracing",
    // and "Dropped N activity records" (logged only where Kineto's verbose log is on).
    bool loss = false;
    if (line.find("Exceeded max GPU buffer") != std::string::npos) {
      ++out.stopped_tracing;
      loss = true;
    } else if (const size_t at = line.find("Dropped "); at != std::string::npos &&
                                                          line.find(" activity records", at) != std::string::npos) {
      const size_t start = at + 8, end = line.find(' ', start);
      if (const auto n = parse_int64(line.substr(start, end - start)); n && *n > 0) {
        out.dropped_records += *n;
        loss = true;
      }
    }
    if (loss && out.examples.size() < 5) out.examples.push_back(shown(line, 300));
  }
  out.unread_bytes = int64_t(lines.unread_bytes());
  if (lines.unread_bytes() > 0)
    out.unread = "read the first " + std::to_string(lines.bytes_read()) + " bytes only (" + lines.bound_hit() + " bound)";
  return out;
}

}  // namespace cudatrace
