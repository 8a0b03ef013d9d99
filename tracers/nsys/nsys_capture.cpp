#include "tracers/nsys/nsys_capture.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "common/cuda_names.h"
#include "common/device_id.h"
#include "common/machine.h"
#include "common/untrusted_file.h"

namespace cudatrace {

namespace {

// The database is the program's user's file, read by root: it is read whole through one
// descriptor opened without following a link and handed to SQLite as memory
// (sqlite3_deserialize), so SQLite never opens a path the user could swap. A bound keeps a
// runaway capture from taking the machine's memory: half of what is available, at least
// 1 GiB (it was a fixed 4 GiB, which a long run's capture outgrows on a large host and a
// small host cannot hold).
uint64_t database_bound() { return std::max<uint64_t>(uint64_t(1) << 30, available_memory_bytes() / 2); }

struct Database {
  sqlite3* h = nullptr;
  ~Database() {
    if (h) sqlite3_close(h);
  }
};

struct Statement {
  sqlite3_stmt* h = nullptr;
  Statement(sqlite3* db, const std::string& sql) {
    if (sqlite3_prepare_v2(db, sql.c_str(), int(sql.size()), &h, nullptr) != SQLITE_OK)
      throw std::runtime_error("cannot read the capture (" + sql + "): " + sqlite3_errmsg(db));
  }
  ~Statement() { sqlite3_finalize(h); }
  bool step() {
    const int rc = sqlite3_step(h);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw std::runtime_error(std::string("cannot read the capture: ") + sqlite3_errmsg(sqlite3_db_handle(h)));
  }
  int64_t integer(int column) const { return sqlite3_column_int64(h, column); }
  std::string text(int column) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(h, column));
    return p ? std::string(p, size_t(sqlite3_column_bytes(h, column))) : std::string();
  }
};

void open_readonly_copy(const std::filesystem::path& file, uint64_t max_bytes, Database& db) {
  std::string why;
  uint64_t size = 0;
  const int fd = open_untrusted_fd(file, &why, &size);
  if (fd < 0) throw std::runtime_error("cannot read " + file.string() + ": " + why);
  struct Close {
    int fd;
    ~Close() { close(fd); }
  } closer{fd};
  if (size > max_bytes)
    throw std::runtime_error(file.string() + " is " + std::to_string(size >> 20) + " MiB, over the " +
                             std::to_string(max_bytes >> 20) + " MiB it may take in memory (half the memory " +
                             "available): trace a shorter run, or on a machine with more memory");
  auto* bytes = static_cast<unsigned char*>(sqlite3_malloc64(size ? size : 1));
  if (!bytes) throw std::runtime_error("out of memory reading " + file.string());
  uint64_t got = 0;
  while (got < size) {
    const ssize_t n = read(fd, bytes + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      sqlite3_free(bytes);
      throw std::runtime_error("cannot read " + file.string() + (n < 0 ? std::string(": ") + std::strerror(errno) : ": it shrank"));
    }
    got += uint64_t(n);
  }
  if (sqlite3_open_v2(":memory:", &db.h, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_free(bytes);
    throw std::runtime_error("sqlite: cannot open an in-memory database");
  }
  // Nothing the file says runs code: no views or triggers, schema functions untrusted,
  // every page's cells checked before use.
  sqlite3_db_config(db.h, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db.h, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_db_config(db.h, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  sqlite3_db_config(db.h, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
  if (sqlite3_deserialize(db.h, "main", bytes, sqlite3_int64(size), sqlite3_int64(size),
                          SQLITE_DESERIALIZE_READONLY | SQLITE_DESERIALIZE_FREEONCLOSE) != SQLITE_OK)
    throw std::runtime_error(file.string() + " is not an SQLite database: " + sqlite3_errmsg(db.h));
  sqlite3_exec(db.h, "PRAGMA cell_size_check=ON", nullptr, nullptr, nullptr);
  // A file that is not a database fails here, at its first read.
  Statement probe(db.h, "SELECT count(*) FROM sqlite_master");
  probe.step();
}

std::set<std::string> tables_of(sqlite3* db) {
  std::set<std::string> out;
  Statement s(db, "SELECT name FROM sqlite_master WHERE type = 'table'");
  while (s.step()) out.insert(s.text(0));
  return out;
}

std::set<std::string> columns_of(sqlite3* db, const std::string& table) {
  std::set<std::string> out;
  Statement s(db, "SELECT name FROM pragma_table_info('" + table + "')");  // our constants only
  while (s.step()) out.insert(s.text(0));
  return out;
}

void require(const std::set<std::string>& have, const std::string& table, std::initializer_list<const char*> need) {
  for (const char* c : need)
    if (!have.count(c))
      throw std::runtime_error("table " + table + " has no column " + c + ": an Nsight Systems export this reader does not know");
}

}  // namespace

namespace {

// A kernel run's launch, by (pid, correlation id): the device the run names, and, once the
// call is read, its thread and name. The runtime's call where the program used it, else
// the driver's (the runtime table is read first).
struct Launch {
  int64_t device = 0;
  std::string device_id;
  bool joined = false;
  int64_t tid = 0;
  std::string name;
};
struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& k) const {
    return std::hash<int64_t>()(k.first * 1000003 ^ k.second);
  }
};

// What the capture is read with: its tables, its strings, the shift onto the harness's
// clock, and the kernel runs' launches.
struct CaptureReading {
  Database& db;
  std::set<std::string> tables;
  std::unordered_map<int64_t, std::string> strings;
  int64_t to_monotonic = 0;
  std::unordered_map<std::pair<int64_t, int64_t>, Launch, PairHash> launches;
  std::string string_of(int64_t id) const {
    auto it = strings.find(id);
    return it == strings.end() ? std::string() : it->second;
  }
};

// Which device each kernel run's launch is on, before any call is read, so that each call
// is sent once, whole.
void read_launch_devices(CaptureReading& c, const std::map<std::pair<int64_t, int64_t>, std::string>& bus_id_of) {
  if (!c.tables.count("CUPTI_ACTIVITY_KIND_KERNEL")) return;
  require(columns_of(c.db.h, "CUPTI_ACTIVITY_KIND_KERNEL"), "CUPTI_ACTIVITY_KIND_KERNEL",
          {"globalPid", "correlationId", "deviceId"});
  Statement s(c.db.h, "SELECT globalPid, correlationId, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL");
  while (s.step()) {
    const int64_t pid = (s.integer(0) >> 24) & 0xFFFFFF;
    Launch& l = c.launches[{pid, s.integer(1)}];
    l.device = s.integer(2);
    if (auto id = bus_id_of.find({pid, l.device}); id != bus_id_of.end()) l.device_id = id->second;
  }
}

// The runtime and driver API calls, in time order.
void read_calls(CaptureReading& c, NsysCapture& out, const NsysEventSink& sink) {
  Database& db = c.db;
  const int64_t to_monotonic = c.to_monotonic;
  out.return_codes = true;
  for (const auto& [table, layer_name] : {std::pair<const char*, const char*>{"CUPTI_ACTIVITY_KIND_RUNTIME", layer::kRuntime},
                                          {"CUPTI_ACTIVITY_KIND_DRIVER", layer::kDriver}}) {
    if (!c.tables.count(table)) {
      out.missing_tables.push_back(table);
      continue;
    }
    const std::set<std::string> cols = columns_of(db.h, table);
    require(cols, table, {"start", "end", "globalTid", "correlationId", "nameId"});
    const bool has_ret = cols.count("returnValue");
    out.return_codes = out.return_codes && has_ret;
    Statement s(db.h, std::string("SELECT start, end, globalTid, correlationId, nameId") +
                          (has_ret ? ", returnValue" : "") + " FROM " + table + " ORDER BY start");
    const bool runtime = layer_name == std::string(layer::kRuntime);
    while (s.step()) {
      Event e;
      e.layer = layer_name;
      e.name = c.string_of(s.integer(4));
      if (runtime) e.name = without_runtime_version(e.name);
      if (e.name.empty()) e.name = "unknown";
      e.ts = s.integer(0) + to_monotonic;
      if (s.integer(1) >= s.integer(0)) e.dur = s.integer(1) - s.integer(0);
      const int64_t global_tid = s.integer(2);
      e.pid = (global_tid >> 24) & 0xFFFFFF;
      e.tid = global_tid & 0xFFFFFF;
      e.corr = uint64_t(s.integer(3));
      if (has_ret) e.ret = s.integer(5);
      // A launch is on the device its kernel ran on: the one call whose device the export says.
      if (auto it = c.launches.find({e.pid, int64_t(*e.corr)}); it != c.launches.end() && !it->second.joined) {
        Launch& l = it->second;
        l.joined = true;
        l.tid = e.tid;
        l.name = e.name;
        e.device = l.device;
        if (!l.device_id.empty()) e.device_id = l.device_id;
      }
      (runtime ? out.runtime_calls : out.driver_calls) += 1;
      sink(std::move(e));
    }
  }
}

// nsys's own warnings, those that speak of loss counted apart.
void read_warnings(CaptureReading& c, NsysCapture& out) {
  Database& db = c.db;
  const std::set<std::string>& tables = c.tables;
  if (tables.count("DIAGNOSTIC_EVENT")) {
    const std::set<std::string> cols = columns_of(db.h, "DIAGNOSTIC_EVENT");
    if (cols.count("severity") && cols.count("text")) {
      Statement s(db.h, "SELECT text FROM DIAGNOSTIC_EVENT WHERE severity > 1");
      while (s.step()) {
        const std::string text = s.text(0);
        std::string lower = text;
        for (char& ch : lower) ch = char(std::tolower(uint8_t(ch)));
        ++out.warnings;
        if (lower.find("drop") != std::string::npos || lower.find("lost") != std::string::npos) ++out.warnings_of_loss;
        if (out.warning_examples.size() < 5) out.warning_examples.push_back(text.substr(0, 300));
      }
    }
  }
}

// Each process's CUDA device numbers and the GPU each stands for, where this export has
// the two tables: the bus id every process shares, whatever CUDA_VISIBLE_DEVICES did.
std::map<std::pair<int64_t, int64_t>, std::string> read_bus_ids(CaptureReading& c, NsysCapture& out) {
  Database& db = c.db;
  const std::set<std::string>& tables = c.tables;
  std::map<std::pair<int64_t, int64_t>, std::string> bus_id_of;  // (pid, CUDA device) -> bus id
  if (tables.count("TARGET_INFO_CUDA_DEVICE") && tables.count("TARGET_INFO_GPU")) {
    const std::set<std::string> dev_cols = columns_of(db.h, "TARGET_INFO_CUDA_DEVICE");
    const std::set<std::string> gpu_cols = columns_of(db.h, "TARGET_INFO_GPU");
    if (dev_cols.count("gpuId") && dev_cols.count("cudaId") && dev_cols.count("pid") && gpu_cols.count("id") &&
        gpu_cols.count("busLocation")) {
      Statement s(db.h, "SELECT c.pid, c.cudaId, g.busLocation FROM TARGET_INFO_CUDA_DEVICE c "
                        "JOIN TARGET_INFO_GPU g ON g.id = c.gpuId");
      while (s.step())
        if (std::string id = normalize_pci_bus_id(s.text(2)); !id.empty()) bus_id_of[{s.integer(0), s.integer(1)}] = id;
      out.device_ids = !bus_id_of.empty();
    }
  }
  return bus_id_of;
}

// The kernels, each joined to the call that launched it.
void read_kernels(CaptureReading& c, const std::map<std::pair<int64_t, int64_t>, std::string>& bus_id_of,
                  NsysCapture& out, const NsysEventSink& sink) {
  Database& db = c.db;
  const char* kernels = "CUPTI_ACTIVITY_KIND_KERNEL";
  if (!c.tables.count(kernels)) {
    out.missing_tables.push_back(kernels);
    return;
  }
  const std::set<std::string> cols = columns_of(db.h, kernels);
  require(cols, kernels, {"start", "end", "globalPid", "correlationId", "deviceId", "streamId", "gridX", "gridY",
                          "gridZ", "blockX", "blockY", "blockZ"});
  // The mangled name where this export has it (what the other methods record), else
  // the demangled one: the report groups kernels by their demangled family either way.
  const char* name_column = cols.count("mangledName")     ? "mangledName"
                            : cols.count("demangledName") ? "demangledName"
                            : cols.count("shortName")     ? "shortName"
                                                          : nullptr;
  if (!name_column) throw std::runtime_error("table CUPTI_ACTIVITY_KIND_KERNEL has no kernel name column");
  Statement s(db.h, std::string("SELECT start, end, globalPid, correlationId, deviceId, streamId, gridX, gridY, "
                                "gridZ, blockX, blockY, blockZ, ") +
                        name_column + " FROM " + kernels + " ORDER BY start");
  while (s.step()) {
    Event e;
    e.layer = layer::kGpuActivity;
    e.name = c.string_of(s.integer(12));
    if (e.name.empty()) e.name = "kernel";
    e.ts = s.integer(0) + c.to_monotonic;
    if (s.integer(1) >= s.integer(0)) e.dur = s.integer(1) - s.integer(0);
    e.pid = (s.integer(2) >> 24) & 0xFFFFFF;
    e.corr = uint64_t(s.integer(3));
    e.args = {{"kernel", e.name},
              {"grid", {s.integer(6), s.integer(7), s.integer(8)}},
              {"block", {s.integer(9), s.integer(10), s.integer(11)}},
              {"stream", s.integer(5)},
              {"device", s.integer(4)}};
    e.device = s.integer(4);
    if (auto id = bus_id_of.find({e.pid, s.integer(4)}); id != bus_id_of.end()) e.device_id = id->second;
    if (auto it = c.launches.find({e.pid, int64_t(*e.corr)}); it != c.launches.end() && it->second.joined) {
      ++out.kernels_joined;
      e.tid = it->second.tid;
      e.args["launched_by"] = it->second.name;
    }
    ++out.kernels;
    sink(std::move(e));
  }
}

}  // namespace

NsysCapture read_nsys_capture(const std::filesystem::path& sqlite_file, int64_t realtime_minus_monotonic_ns,
                              const NsysEventSink& sink, uint64_t max_database_bytes) {
  NsysCapture out;
  try {
    Database db;
    open_readonly_copy(sqlite_file, max_database_bytes ? max_database_bytes : database_bound(), db);
    CaptureReading c{db, tables_of(db.h), {}, 0, {}};
    if (!c.tables.count("TARGET_INFO_SESSION_START_TIME"))
      throw std::runtime_error("the capture has no TARGET_INFO_SESSION_START_TIME: its times cannot be put on the "
                               "harness's clock");
    {
      require(columns_of(db.h, "TARGET_INFO_SESSION_START_TIME"), "TARGET_INFO_SESSION_START_TIME", {"utcEpochNs"});
      Statement s(db.h, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1");
      if (!s.step()) throw std::runtime_error("TARGET_INFO_SESSION_START_TIME is empty");
      c.to_monotonic = s.integer(0) - realtime_minus_monotonic_ns;
    }
    if (c.tables.count("StringIds")) {
      require(columns_of(db.h, "StringIds"), "StringIds", {"id", "value"});
      Statement s(db.h, "SELECT id, value FROM StringIds");
      while (s.step()) c.strings[s.integer(0)] = s.text(1);
    }
    const auto bus_id_of = read_bus_ids(c, out);
    read_launch_devices(c, bus_id_of);
    read_calls(c, out, sink);
    read_warnings(c, out);
    read_kernels(c, bus_id_of, out, sink);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace cudatrace
