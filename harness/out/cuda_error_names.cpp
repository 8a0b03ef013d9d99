#include "harness/out/cuda_error_names.h"

#include "harness/cuda_error_table.h"  // generated

namespace cudatrace {

namespace {

template <size_t N>
std::string lookup(const generated::ErrorName (&table)[N], int64_t code) {
  for (const auto& row : table)
    if (row.code == code) return row.name;
  return "";
}

}  // namespace

std::string cuda_runtime_error_name(int64_t code) { return lookup(generated::kRuntimeErrors, code); }
std::string cuda_driver_error_name(int64_t code) { return lookup(generated::kDriverErrors, code); }

}  // namespace cudatrace
