#include "harness/score/kernel_families.h"

#include <cxxabi.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace cudatrace {

namespace {

// The nested name at the start of an Itanium-mangled symbol ("_ZN2at6native6kernelI..." ->
// "at::native::kernel"), read as far as the text goes: it works on a symbol cut short, as
// one method's collector hands them over (cupti's, in 64-byte fields). Empty when the text
// is not of that shape.
constexpr const char* kAnonymous = "{anonymous}";

std::string mangled_prefix(const std::string& s) {
  size_t i = 2;  // past "_Z"
  const bool nested = i < s.size() && s[i] == 'N';
  if (nested) ++i;
  std::string out;
  if (s.compare(i, 2, "St") == 0) out = "std", i += 2;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    size_t len = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) len = len * 10 + size_t(s[i++] - '0');
    if (len == 0 || len > 4096) return "";
    // nvcc names an anonymous namespace _GLOBAL__N__<hash>_<file>; demangled, it reads
    // "(anonymous namespace)": one token for both.
    const bool anonymous = s.compare(i, 10, "_GLOBAL__N") == 0;
    out += (out.empty() ? "" : "::") + (anonymous ? std::string(kAnonymous) : s.substr(i, len));
    i += len;
    if (!nested) break;
  }
  return out;
}

}  // namespace

std::string kernel_family(const std::string& name) {
  // Compared on the first kFamilyChars characters: a reference that cuts names there
  // (cupti's 64-byte fields) and a method that does not must name one kernel alike.
  std::string s = name.substr(0, kFamilyChars);
  if (s.rfind("_Z", 0) == 0)
    if (std::string prefix = mangled_prefix(s); !prefix.empty()) return prefix;
  if (s.rfind("_Z", 0) == 0) {
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &status), &std::free);
    if (status == 0 && d) s = d.get();
  }
  for (size_t at; (at = s.find("(anonymous namespace)")) != std::string::npos;) s.replace(at, 21, kAnonymous);
  if (auto paren = s.find('('); paren != std::string::npos) s.resize(paren);
  if (auto angle = s.find('<'); angle != std::string::npos) s.resize(angle);  // templates: one family
  if (auto space = s.rfind(' '); space != std::string::npos) s = s.substr(space + 1);  // "void f" -> "f"
  return s;
}

int64_t join_cut_kernel_families(const std::map<std::string, int64_t>& reference, std::map<std::string, int64_t>& seen) {
  constexpr size_t kShortest = 8;  // below this a common beginning says little
  int64_t joined = 0;
  // The longest (most particular) reference names first: "at::native::{anonymous}" begins
  // "at::native::{anonymous}::CatArrayBatchedCopy..." too, and taken first it took that
  // kernel from "at::native::{anonymous}::CatArr", the family it is (DDP under the PyTorch
  // profiler read one CatArrayBatchedCopy a rank missing, and one multi_tensor_apply_kernel
  // only it saw).
  std::vector<std::pair<std::string_view, int64_t>> by_length(reference.begin(), reference.end());
  std::stable_sort(by_length.begin(), by_length.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& [name, n] : by_length) {
    const std::string f(name);
    int64_t short_by = n - (seen.count(f) ? seen.at(f) : 0);
    if (short_by <= 0 || f.size() < kShortest) continue;
    for (auto& [g, s] : seen) {
      if (short_by <= 0) break;
      if (s <= 0 || reference.count(g) || g.size() < kShortest) continue;
      const size_t common = std::min(f.size(), g.size());
      if (f.compare(0, common, g, 0, common) != 0) continue;
      const int64_t k = std::min(short_by, s);
      s -= k;
      short_by -= k;
      joined += k;
    }
    if (const int64_t moved = n - (seen.count(f) ? seen.at(f) : 0) - short_by; moved > 0) seen[f] += moved;
  }
  // Emptied families leave no trace of a name the method never ran under.
  std::erase_if(seen, [](const auto& kv) { return kv.second == 0; });
  return joined;
}

}  // namespace cudatrace
