// Trust under bad input and concurrency: frees that are not ductile's to
// take, fork while other threads are inside the allocator, many threads on
// few cores. This program links the library's objects, so ductile is also
// the allocator of the test process itself.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/patterns.h"

namespace ductile {
namespace {

using test::check;
using test::fill;

// Two 40 KiB blocks that are neighbours, freed past the thread cache so that
// the chunk layer merges them, then an 80 KiB block over the pair: the
// second block's old first page lies inside it. A page-map tag left there
// made free(big + 40 KiB) put that page into the cache as a 40 KiB block,
// and the next malloc(40 KiB) handed out memory inside the live 80 KiB one.
TEST(StaleTag, InteriorFreeOverMergedBlocksIsNotTaken) {
  constexpr size_t kHalf = 40 * 1024;
  char* lo = nullptr;
  std::vector<void*> held;
  for (int i = 0; i < 64 && lo == nullptr; i++) {
    char* a = static_cast<char*>(ductile_mallocx(kHalf, MALLOCX_TCACHE_NONE));
    char* b = static_cast<char*>(ductile_mallocx(kHalf, MALLOCX_TCACHE_NONE));
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    if (b == a + kHalf) {
      lo = a;
    } else if (a == b + kHalf) {
      lo = b;
    } else {
      held.push_back(a);
      held.push_back(b);
      continue;
    }
    ductile_dallocx(a, MALLOCX_TCACHE_NONE);
    ductile_dallocx(b, MALLOCX_TCACHE_NONE);
  }
  ASSERT_NE(lo, nullptr) << "no two neighbouring 40 KiB blocks";
  char* big = static_cast<char*>(ductile_mallocx(2 * kHalf, MALLOCX_TCACHE_NONE));
  ASSERT_EQ(big, lo) << "the merged pair was not reused";
  fill(big, 2 * kHalf, 7);
  ductile_free(big + kHalf);  // not a block: must not be taken
  std::vector<char*> got;
  for (int i = 0; i < 8; i++) {
    char* q = static_cast<char*>(ductile_malloc(kHalf));
    ASSERT_NE(q, nullptr);
    EXPECT_FALSE(q + kHalf > big && q < big + 2 * kHalf) << "a block inside a live one";
    got.push_back(q);
  }
  EXPECT_TRUE(check(big, 2 * kHalf, 7));
  for (char* q : got) ductile_free(q);
  ductile_free(big);
  for (void* p : held) ductile_dallocx(p, MALLOCX_TCACHE_NONE);
}

}  // namespace
}  // namespace ductile
