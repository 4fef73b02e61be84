// SPDX-License-Identifier: BSD-2-Clause
// How ductile::vector's buffer grows under ductile: push_back of 1 GiB of
// uint64_t copies no huge block (ductile's growth counters), and the
// process's peak resident set grows by about the final buffer, not the one
// and a half to two buffers of a std::vector.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "test/unit/api/vector_helpers.h"

namespace ductile::test {
namespace {

// A sanitizer's shadow memory grows with what the program writes: no peak
// to check there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kShadowed = true;
#else
constexpr bool kShadowed = false;
#endif

// A line of /proc/self/status in KiB ("VmHWM", "VmRSS"); -1 if not found.
long status_kib(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long v = -1;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') v = std::strtol(line + n + 1, nullptr, 10);
  std::fclose(f);
  return v;
}

// Sets the peak resident set (VmHWM) back to the current one; false where
// the kernel does not let it.
bool reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// A 1 GiB push_back loop, as a program that fills a large buffer makes. About a second.
TEST(VectorGrowth, PushBackToOneGiBCopiesNoHugeBlock) {
  constexpr size_t kElements = size_t{1} << 27;  // 1 GiB of uint64_t
  constexpr size_t kHuge = size_t{2} << 20;      // ductile's huge threshold
  const Growth before = growth();
  const bool peak_known = reset_peak_rss();
  const long rss0 = status_kib("VmRSS");
  size_t huge_steps = 0, moves = 0;
  {
    ductile::vector<uint64_t> v;
    const uint64_t* data = nullptr;
    size_t cap = 0;
    for (uint64_t i = 0; i < kElements; i++) {
      v.push_back(i);
      if (v.capacity() != cap) {
        if (cap * sizeof(uint64_t) >= kHuge) {
          huge_steps++;
          if (v.data() != data) moves++;
        }
        cap = v.capacity();
        data = v.data();
      }
    }
    ASSERT_EQ(v.size(), kElements);
    for (size_t i = 0; i < kElements; i += 4093) ASSERT_EQ(v[i], i);
    const long peak = status_kib("VmHWM");
    if (!kShadowed && peak_known && peak > 0 && rss0 > 0) {
      const double grew = static_cast<double>(peak - rss0) / static_cast<double>(kElements * sizeof(uint64_t) / 1024);
      EXPECT_LT(grew, 1.15) << "the peak resident set grew by " << grew << " times the buffer";
    }
  }
  const Growth after = growth();
  EXPECT_EQ(after.copies() - before.copies(), 0u) << "huge blocks were copied";
  EXPECT_GE(after.resized() - before.resized(), huge_steps) << "growth steps of huge blocks that took none of the paths";
  EXPECT_GE(huge_steps, 9u);  // 2 MiB to 1 GiB by doubling
  std::printf("%zu growth steps past 2 MiB, %zu of them moved the buffer (mremap: %llu), none copied\n", huge_steps,
              moves, static_cast<unsigned long long>(after.by[kMremap] - before.by[kMremap]));
}

}  // namespace
}  // namespace ductile::test
