#pragma once
// A CUDA call's arguments as the injection library reports them: up to five 64-bit slots,
// laid out as tracers/preload/hooks.def says for that call, so the harness decodes CUPTI's
// records with the same table as the other methods' (tracers/call_args.h).
#include <cupti.h>

#include <cstdint>

namespace cudatrace::cupti {

inline constexpr int kSlots = 5;

// Fills all kSlots `slots` for the call CUPTI reports as (domain, cbid) with parameter struct
// `params`, at the call's exit (out-parameters are read then); slots the call does not use,
// and all five of a call not in call_slots.def, are 0. Returns whether the call is one it
// decodes.
bool fill_slots(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params, uint64_t* slots);

}  // namespace cudatrace::cupti
