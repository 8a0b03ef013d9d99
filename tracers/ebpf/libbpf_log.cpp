#include "tracers/ebpf/libbpf_log.h"

#include <sys/resource.h>

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace cudatrace {

namespace {

std::mutex g_log_mu;
std::string g_log;

int collect(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char buf[1024];
  int n = vsnprintf(buf, sizeof buf, fmt, args);
  std::lock_guard lk(g_log_mu);
  if (g_log.size() < 16384) g_log += buf;
  return n;
}

}  // namespace

void capture_libbpf_messages() {
  libbpf_set_print(collect);
  rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

std::string last_libbpf_message() {
  std::lock_guard lk(g_log_mu);
  std::string s;
  s.swap(g_log);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (auto nl = s.rfind('\n'); nl != std::string::npos) s = s.substr(nl + 1);
  return s;
}

}  // namespace cudatrace
