// The shim's generic driver forwarders, called directly: whatever the real function's
// arity, every integer argument must arrive, registers and stack alike.
#include <gtest/gtest.h>

#include "tracers/preload/shim/generic_hooks.h"

using namespace cudatrace::preload;

namespace {

int eight(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f, uint64_t g, uint64_t h) {
  // Weighted so that any argument in the wrong place changes the result.
  return int(a * 1 + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8);
}
int none() { return 42; }

}  // namespace

TEST(PreloadGeneric, ForwardsRegisterAndStackArguments) {
  void* w = generic_wrapper_for("cuTestEight", reinterpret_cast<void*>(&eight));
  ASSERT_NE(w, nullptr);
  auto call = reinterpret_cast<int (*)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t)>(w);
  EXPECT_EQ(call(1, 2, 3, 4, 5, 6, 7, 8), eight(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_EQ(call(8, 7, 6, 5, 4, 3, 2, 1), eight(8, 7, 6, 5, 4, 3, 2, 1));
  EXPECT_EQ(generic_wrapper_for("cuTestEight", reinterpret_cast<void*>(&eight)), w) << "one forwarder per function";
  void* w0 = generic_wrapper_for("cuTestNone", reinterpret_cast<void*>(&none));
  EXPECT_NE(w0, w);
  EXPECT_EQ(reinterpret_cast<int (*)()>(w0)(), 42);
}

TEST(PreloadGeneric, FloatTakingReferenceCallsAreLeftAlone) {
  EXPECT_EQ(generic_wrapper_for("cuTexRefSetMipmapLevelBias", reinterpret_cast<void*>(&none)), nullptr);
  EXPECT_EQ(generic_wrapper_for("cuGetProcAddress_v2", reinterpret_cast<void*>(&none)), nullptr);
}
