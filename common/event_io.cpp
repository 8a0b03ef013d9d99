#include "common/event_io.h"
#include "common/event_store.h"

#include "common/outside_text.h"
#include "common/untrusted_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace cudatrace {

namespace {
nlohmann::json::parser_callback_t depth_bound(int max_depth) {
  return [max_depth](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > max_depth) throw EventFormatError("nested deeper than " + std::to_string(max_depth));
    return true;
  };
}
}  // namespace

nlohmann::json parse_outside_json(const std::string& text, int max_depth) {
  return nlohmann::json::parse(text, depth_bound(max_depth));
}

nlohmann::json parse_outside_json(std::istream& in, int max_depth) {
  return nlohmann::json::parse(in, depth_bound(max_depth));
}

namespace {

template <class T>
T required(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) throw EventFormatError(std::string("missing field \"") + key + "\"");
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw EventFormatError(std::string("field \"") + key + "\" has the wrong type");
  }
}

template <class T>
std::optional<T> optional_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw EventFormatError(std::string("field \"") + key + "\" has the wrong type");
  }
}

}  // namespace

Event event_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw EventFormatError("record is not a JSON object");
  int v = required<int>(j, "v");
  if (v != kEventVersion)
    throw EventFormatError("unsupported record version " + std::to_string(v) + " (this build reads " +
                           std::to_string(kEventVersion) + ")");
  Event e;
  e.layer = required<std::string>(j, "layer");
  e.name = required<std::string>(j, "name");
  e.ts = required<int64_t>(j, "ts");
  e.dur = optional_field<int64_t>(j, "dur");
  e.pid = required<int64_t>(j, "pid");
  e.tid = required<int64_t>(j, "tid");
  e.ret = optional_field<int64_t>(j, "ret");
  if (auto it = j.find("args"); it != j.end()) {
    if (!it->is_object()) throw EventFormatError("field \"args\" is not an object");
    e.args = *it;
  }
  e.corr = optional_field<uint64_t>(j, "corr");
  e.device = optional_field<int64_t>(j, "device");
  if (auto id = optional_field<std::string>(j, "device_id")) e.device_id = *id;
  return e;
}

EventWriter::EventWriter(const std::filesystem::path& path)
    : EventWriter(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644), path) {}

EventWriter::EventWriter(int fd, const std::filesystem::path& path) : path_(path) {
  if (fd < 0) throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
  f_ = fdopen(fd, "w");
  if (!f_) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(err));
  }
}

EventWriter::~EventWriter() {
  if (f_) std::fclose(f_);
}

void EventWriter::write(const Event& e) {
  // Serialised field by field, "v" first as the schema asks, in a fixed order (diff-able
  // files); only the free-form fields go through the JSON library, for their escaping.
  std::string line = "{\"v\":" + std::to_string(kEventVersion);
  line += ",\"layer\":" + dump_safe(nlohmann::json(e.layer));
  line += ",\"name\":" + dump_safe(nlohmann::json(e.name));
  line += ",\"ts\":" + std::to_string(e.ts);
  if (e.dur) line += ",\"dur\":" + std::to_string(*e.dur);
  line += ",\"pid\":" + std::to_string(e.pid);
  line += ",\"tid\":" + std::to_string(e.tid);
  if (e.ret) line += ",\"ret\":" + std::to_string(*e.ret);
  line += ",\"args\":" + (e.args.is_object() ? dump_safe(e.args) : std::string("{}"));
  if (e.corr) line += ",\"corr\":" + std::to_string(*e.corr);
  if (e.device) line += ",\"device\":" + std::to_string(*e.device);
  if (!e.device_id.empty()) line += ",\"device_id\":" + dump_safe(nlohmann::json(e.device_id));
  line += "}";
  write_line(line);
}

void EventWriter::write_line(const std::string& json_line) {
  if (std::fwrite(json_line.data(), 1, json_line.size(), f_) != json_line.size() || std::fputc('\n', f_) == EOF)
    fail(errno);
  ++written_;
}

void EventWriter::fail(int err) {
  // No half line is left for a reader to trip on: the partial file goes.
  std::fclose(f_);
  f_ = nullptr;
  ::unlink(path_.c_str());
  throw std::runtime_error("cannot write " + path_.string() + ": " + std::strerror(err) + " (partial file removed)");
}

void EventWriter::close() {
  if (!f_) return;
  bool bad = std::fflush(f_) != 0 || std::ferror(f_);
  int err = errno;
  if (bad) fail(err);
  if (std::fclose(f_) != 0) {
    f_ = nullptr;
    ::unlink(path_.c_str());
    throw std::runtime_error("cannot write " + path_.string() + ": " + std::strerror(errno) + " (partial file removed)");
  }
  f_ = nullptr;
}

EventStream read_events(const std::filesystem::path& path, uint64_t max_bytes) {
  // The traced program may have written it: never through a link, a regular file only,
  // the store or JSON lines alike (EventReader tells them apart).
  StoreLimits limits;
  limits.max_file_bytes = max_bytes;
  if (max_bytes != UINT64_MAX) limits.max_inflated_bytes = max_bytes > UINT64_MAX / 64 ? UINT64_MAX : max_bytes * 64;
  EventReader in(path, limits);
  EventStream out;
  Event e;
  while (in.next(e)) (e.is_meta() ? out.meta : out.events).push_back(std::move(e));
  return out;
}

}  // namespace cudatrace
