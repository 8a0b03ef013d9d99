#include "tracers/cupti/injection/call_slots.h"  // cupti.h brings the parameter structs

#include <type_traits>

#include "common/dim3_pack.h"

namespace cudatrace::cupti {

namespace {

template <class T>
uint64_t to_slot(T v) {
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<uint64_t>(v);
  } else if constexpr (std::is_same_v<T, dim3>) {
    return pack_dim3(v.x, v.y, v.z);
  } else if constexpr (std::is_enum_v<T>) {
    return uint64_t(int64_t(std::underlying_type_t<T>(v)));
  } else if constexpr (std::is_signed_v<T>) {
    return uint64_t(int64_t(v));  // an int slot of -1 decodes as -1
  } else {
    return uint64_t(v);
  }
}

// An out-parameter, after the call: what it points to (0 when the program passed null).
template <class T>
uint64_t out(T* p) {
  return p ? to_slot(*p) : 0;
}

// A struct passed by pointer (a launch configuration); zeros when the pointer is null,
// which a failing call may well have been given.
template <class T>
const T& deref(const T* p) {
  static const T zero{};
  return p ? *p : zero;
}

uint64_t dim3_of(unsigned x, unsigned y, unsigned z) { return pack_dim3(x, y, z); }

// Every slot is written, the unused ones 0: the caller need not clear them first. Straight
// into `slots`: a local array of them first cost a stalled reload (about 10 ns a call).
template <class... A>
void store(uint64_t* slots, A... values) {
  static_assert(sizeof...(A) <= kSlots, "at most five slots");
  int i = 0;
  ((slots[i++] = to_slot(values)), ...);
  for (; i < kSlots; ++i) slots[i] = 0;
}

}  // namespace

bool fill_slots(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params, uint64_t* slots) {
  if (!params) {
    store(slots);
    return false;
  }
  // Callback ids repeat across domains: switch on both.
  constexpr auto key = [](CUpti_CallbackDomain d, uint32_t id) { return uint64_t(d) << 32 | id; };
#define SLOTS_CASE(domain, id, type, ...)               \
  case key(domain, id): {                               \
    const auto* p = static_cast<const type*>(params);   \
    store(slots, __VA_ARGS__);                          \
    return true;                                        \
  }
#define RT_LIKE(id, type, ...) \
  SLOTS_CASE(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##id, type, __VA_ARGS__)
#define RT(id, ...) RT_LIKE(id, id##_params, __VA_ARGS__)
#define DRV(id, ...) SLOTS_CASE(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##id, id##_params, __VA_ARGS__)
  switch (key(domain, cbid)) {
#include "tracers/cupti/injection/call_slots.def"
    default:
      store(slots);
      return false;
  }
#undef DRV
#undef RT
#undef RT_LIKE
#undef SLOTS_CASE
}

}  // namespace cudatrace::cupti
