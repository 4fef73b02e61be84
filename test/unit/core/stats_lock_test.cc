// SPDX-License-Identifier: BSD-2-Clause
// Reading the statistics takes no lock (a cross-cutting suite through the API, kept by its concern
// under core/, whose core/stats.cc keeps the figures).
//
// mallctl's stats.* after an epoch, mallinfo2 and mallinfo, malloc_stats,
// malloc_stats_print and malloc_info read counters that the layers keep under
// their locks, so a read never waits for an allocation, nor an allocation for
// a read, however large the heap. This program defines pthread_mutex_lock and
// pthread_mutex_trylock itself: the allocator's objects are linked into it, so
// every lock they take comes here, is counted for the calling thread, and is
// passed on to the C library's.
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"

// The C library's definitions, under the names it also exports them by
// (versions of the first glibc of each architecture: old names, not linked
// to without a version).
#if defined(__x86_64__)
#define DUCTILE_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define DUCTILE_GLIBC_BASE "GLIBC_2.17"
#else
#error "the C library's first version on this architecture"
#endif
extern "C" {
int libc_mutex_lock(pthread_mutex_t* m);
int libc_mutex_trylock(pthread_mutex_t* m);
}
__asm__(".symver libc_mutex_lock, __pthread_mutex_lock@" DUCTILE_GLIBC_BASE);
__asm__(".symver libc_mutex_trylock, __pthread_mutex_trylock@" DUCTILE_GLIBC_BASE);

namespace {
thread_local bool t_counting = false;
thread_local unsigned t_locks = 0;
}  // namespace

extern "C" int pthread_mutex_lock(pthread_mutex_t* m) noexcept {
  if (t_counting) t_locks++;
  return libc_mutex_lock(m);
}

extern "C" int pthread_mutex_trylock(pthread_mutex_t* m) noexcept {
  if (t_counting) t_locks++;
  return libc_mutex_trylock(m);
}

namespace ductile {
namespace {

// The locks the calling thread takes while `f` runs.
template <typename F>
unsigned locks_taken(F f) {
  t_locks = 0;
  t_counting = true;
  f();
  t_counting = false;
  return t_locks;
}

// Keeps the compiler from pairing a malloc with its free and dropping both.
void* opaque(void* p) {
  void* volatile v = p;
  return v;
}

// A heap with slabs in many classes, medium and huge blocks, and free
// objects and empty slabs in the bins.
class StatsLockTest : public testing::Test {
 protected:
  void SetUp() override {
    for (size_t i = 0; i < 20000; i++) blocks_.push_back(opaque(malloc(8 + (i % 64) * 24)));
    for (size_t i = 0; i < 200; i++) blocks_.push_back(opaque(mallocx(100 + i * 8, MALLOCX_TCACHE_NONE)));
    blocks_.push_back(opaque(malloc(100 * 1024)));
    blocks_.push_back(opaque(malloc(5 << 20)));
    for (size_t i = 0; i < blocks_.size(); i += 3) {
      free(blocks_[i]);
      blocks_[i] = nullptr;
    }
  }
  void TearDown() override {
    for (void* p : blocks_) free(p);
  }
  std::vector<void*> blocks_;
};

// The counting works: taking objects from a bin past the thread cache
// takes the bin's lock.
TEST_F(StatsLockTest, AnUncachedAllocationIsSeenTakingALock) {
  void* p = nullptr;
  EXPECT_GT(locks_taken([&] { p = mallocx(64, MALLOCX_TCACHE_NONE); }), 0u);
  ASSERT_NE(p, nullptr);
  EXPECT_GT(locks_taken([&] { dallocx(p, MALLOCX_TCACHE_NONE); }), 0u);
}

TEST_F(StatsLockTest, MallctlStatsTakeNoLock) {
  for (const char* name : {"stats.allocated", "stats.active", "stats.resident", "stats.mapped",
                           "stats.retained", "stats.metadata"}) {
    size_t v = 0, len = sizeof v;
    uint64_t epoch = 1;
    size_t elen = sizeof epoch;
    int rc_epoch = -1, rc = -1;
    const unsigned n = locks_taken([&] {
      rc_epoch = mallctl("epoch", &epoch, &elen, &epoch, sizeof epoch);
      rc = mallctl(name, &v, &len, nullptr, 0);
    });
    EXPECT_EQ(rc_epoch, 0);
    EXPECT_EQ(rc, 0) << name;
    EXPECT_GT(v, 0u) << name;
    EXPECT_EQ(n, 0u) << name;
  }
}

TEST_F(StatsLockTest, MallinfoTakesNoLock) {
  struct mallinfo2 m2 = {};
  struct mallinfo m = {};
  EXPECT_EQ(locks_taken([&] { m2 = mallinfo2(); }), 0u);
  EXPECT_EQ(locks_taken([&] { m = ductile_mallinfo(); }), 0u);  // mallinfo() is deprecated
  EXPECT_GT(m2.uordblks, 20000u * 8);
  EXPECT_GT(m2.smblks, 0u);
  EXPECT_GT(m.uordblks, 0);
}

TEST_F(StatsLockTest, TheSnapshotTakesNoLock) {
  core::StatsSnapshot s;
  EXPECT_EQ(locks_taken([&] { core::take_snapshot(s); }), 0u);
  EXPECT_GT(s.allocated, 0u);
}

void count_text(void* opaque, const char* text) { *static_cast<size_t*>(opaque) += std::strlen(text); }

TEST_F(StatsLockTest, PrintingTakesNoLock) {
  // malloc_stats writes to standard error: /dev/null for now.
  fflush(stderr);
  const int saved = dup(2);
  const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(saved, 0);
  ASSERT_GE(null, 0);
  ASSERT_EQ(dup2(null, 2), 2);
  const unsigned stats_locks = locks_taken([] { malloc_stats(); });
  ASSERT_EQ(dup2(saved, 2), 2);
  close(saved);
  close(null);
  EXPECT_EQ(stats_locks, 0u);

  for (const char* opts : {"", "J", "b"}) {
    size_t bytes = 0;
    EXPECT_EQ(locks_taken([&] { malloc_stats_print(count_text, &bytes, opts); }), 0u) << opts;
    EXPECT_GT(bytes, 0u) << opts;
  }

  FILE* f = fopen("/dev/null", "w");  // its buffer allocated now, not in malloc_info
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(setvbuf(f, nullptr, _IONBF, 0), 0);
  int rc = -1;
  EXPECT_EQ(locks_taken([&] { rc = malloc_info(0, f); }), 0u);
  EXPECT_EQ(rc, 0);
  fclose(f);
}

}  // namespace
}  // namespace ductile
