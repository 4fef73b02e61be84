// SPDX-License-Identifier: BSD-2-Clause
// glibc's allocator interface as ductile answers it (api/glibc.cc): mallinfo2, mallinfo,
// malloc_stats, mallopt, the __libc_ names, and C23's free_sized and free_aligned_sized.
//
// This program links the library's objects, so ductile is the allocator of the whole
// test process; glibc's own functions, the reference for "as glibc", are looked up
// past it (RTLD_NEXT).
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/options.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"
#include "small/bin.h"
#include "small/size_classes.h"
#include "support/patterns.h"
#include "support/sizes.h"
#include "unit/api/glibc_helpers.h"

// Declared here: the C library's headers declare neither these (glibc's
// internal names) nor, before C23 support, the sized frees.
extern "C" {
void* __libc_malloc(size_t) noexcept;
void __libc_free(void*) noexcept;
void* __libc_calloc(size_t, size_t) noexcept;
void* __libc_realloc(void*, size_t) noexcept;
void* __libc_memalign(size_t, size_t) noexcept;
void* __libc_valloc(size_t) noexcept;
void* __libc_pvalloc(size_t) noexcept;
void free_sized(void*, size_t) noexcept;
void free_aligned_sized(void*, size_t, size_t) noexcept;
}

namespace ductile {
namespace {

using test::check;
using test::fill;
using test::from_libc;
using test::kMiB;
using test::opaque;

constexpr size_t kKiB = 1024;

size_t threshold() { return core::rt().huge.options().threshold; }

chunk::ExtentKind kind_of(const void* p) {
  const chunk::Extent* e = core::owner_of(p);
  return e == nullptr ? chunk::ExtentKind::kNone : e->kind;
}

// ---- mallinfo2 / mallinfo ----------------------------------------------

TEST(Mallinfo2, SmallAndMediumBlocksAreInUordblks) {
  ductile_trim();
  const struct mallinfo2 before = mallinfo2();
  EXPECT_EQ(before.arena, before.uordblks + before.fordblks);
  void* medium = opaque(malloc(100 * kKiB));
  std::vector<void*> small;
  for (int i = 0; i < 100; i++) small.push_back(opaque(malloc(1000)));
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.uordblks, before.uordblks + 100 * kKiB + 100 * 1000);
  EXPECT_EQ(after.arena, after.uordblks + after.fordblks);
  EXPECT_EQ(after.hblks, before.hblks);
  EXPECT_EQ(after.hblkhd, before.hblkhd);
  EXPECT_EQ(after.usmblks, 0u);
  // Freed blocks wait in this thread's cache, which counts as in use; a
  // trim gives them back.
  free(medium);
  for (void* p : small) free(p);
  ductile_trim();
  const struct mallinfo2 trimmed = mallinfo2();
  EXPECT_LE(trimmed.uordblks + 100 * kKiB + 100 * 1000, after.uordblks);
}

TEST(Mallinfo2, HugeBlocksAreCountedApart) {
  const struct mallinfo2 before = mallinfo2();
  void* p = opaque(malloc(32 * kMiB));
  ASSERT_NE(p, nullptr);
  const struct mallinfo2 one = mallinfo2();
  EXPECT_EQ(one.hblks, before.hblks + 1);
  EXPECT_EQ(one.hblkhd, before.hblkhd + 32 * kMiB);
  EXPECT_EQ(one.uordblks, before.uordblks);  // not in the arena, as glibc's mmapped chunks
  void* q = opaque(malloc(5 * kMiB + 1));
  const struct mallinfo2 two = mallinfo2();
  EXPECT_EQ(two.hblks, before.hblks + 2);
  EXPECT_EQ(two.hblkhd, before.hblkhd + 32 * kMiB + 5 * kMiB + kPage);  // whole pages
  p = realloc(p, 64 * kMiB);
  ASSERT_NE(p, nullptr);
  const struct mallinfo2 grown = mallinfo2();
  EXPECT_EQ(grown.hblks, two.hblks);
  EXPECT_EQ(grown.hblkhd, two.hblkhd + 32 * kMiB);
  free(p);
  free(q);
  const struct mallinfo2 after = mallinfo2();
  EXPECT_EQ(after.hblks, before.hblks);
  EXPECT_EQ(after.hblkhd, before.hblkhd);
  // The same figures as the huge layer's own.
  core::StatsSnapshot s;
  core::take_snapshot(s);
  EXPECT_EQ(after.hblks, s.huge_layer.allocs - s.huge_layer.frees);
  EXPECT_EQ(after.hblkhd, s.huge.allocated);
}

TEST(Mallinfo2, FreedMemoryIsFreeAndTrimGivesBackKeepcost) {
  ductile_trim();
  const struct mallinfo2 before = mallinfo2();
  EXPECT_LE(before.keepcost, before.fordblks);
  // A huge block written all over and freed: its pages come back dirty.
  void* p = opaque(malloc(16 * kMiB));
  std::memset(opaque(p), 1, 16 * kMiB);  // opaque: not a dead store before free
  free(p);
  const struct mallinfo2 freed = mallinfo2();
  EXPECT_GE(freed.fordblks, before.fordblks + 16 * kMiB);
  EXPECT_GE(freed.keepcost, before.keepcost + 16 * kMiB);
  EXPECT_GE(freed.ordblks, 1u);
  EXPECT_LE(freed.keepcost, freed.fordblks);
  EXPECT_EQ(freed.arena, freed.uordblks + freed.fordblks);
  EXPECT_EQ(ductile_malloc_trim(0), 1);
  const struct mallinfo2 trimmed = mallinfo2();
  EXPECT_EQ(trimmed.keepcost, 0u);
  EXPECT_EQ(trimmed.ordblks, 0u);
  EXPECT_LE(trimmed.fordblks + 16 * kMiB, freed.fordblks);
}

TEST(Mallinfo2, FreeSmallObjectsAreSmblks) {
  const size_t n = 2000, size = 48;
  std::vector<void*> v;
  for (size_t i = 0; i < n; i++) v.push_back(opaque(malloc(size)));
  const struct mallinfo2 live = mallinfo2();
  for (void* p : v) free(p);
  const struct mallinfo2 freed = mallinfo2();
  // All but what this thread's cache keeps went back to the slabs: its
  // bin's depth, which a batch like this one may have grown
  // (small::kDepthGrowth).
  const small::ThreadCache* tc = core::own_cache();
  ASSERT_NE(tc, nullptr);
  const size_t kept = tc->bins[test::class_of_request(size)].limit;
  EXPECT_GE(freed.smblks, live.smblks + n - kept);
  EXPECT_GE(freed.fsmblks, live.fsmblks + (n - kept) * size);
  EXPECT_LE(freed.fsmblks, freed.fordblks);
  EXPECT_LE(freed.uordblks + (n - kept) * size, live.uordblks);
}

TEST(Mallinfo2, MatchesTheSnapshot) {
  core::StatsSnapshot s;
  core::take_snapshot(s);
  const struct mallinfo2 m = mallinfo2();
  const core::HeapInfo h = core::heap_info(s);
  EXPECT_EQ(m.arena, h.arena);
  EXPECT_EQ(m.uordblks, h.uordblks);
  EXPECT_EQ(m.hblkhd, h.hblkhd);
  EXPECT_EQ(m.keepcost, h.keepcost);
  EXPECT_EQ(h.uordblks + h.hblkhd, s.allocated);
  EXPECT_EQ(h.uordblks, s.small.allocated + s.medium.allocated);
  EXPECT_EQ(h.ordblks, s.chunk.dirty_extents);
}

TEST(Mallinfo, AgreesWithMallinfo2) {
  void* h = opaque(malloc(8 * kMiB));
  void* m = opaque(malloc(300 * kKiB));
  const struct mallinfo2 m2 = mallinfo2();
  const struct mallinfo m1 = ductile_mallinfo();  // mallinfo() is deprecated
  EXPECT_EQ(static_cast<size_t>(m1.arena), m2.arena);
  EXPECT_EQ(static_cast<size_t>(m1.ordblks), m2.ordblks);
  EXPECT_EQ(static_cast<size_t>(m1.smblks), m2.smblks);
  EXPECT_EQ(static_cast<size_t>(m1.hblks), m2.hblks);
  EXPECT_EQ(static_cast<size_t>(m1.hblkhd), m2.hblkhd);
  EXPECT_EQ(static_cast<size_t>(m1.usmblks), m2.usmblks);
  EXPECT_EQ(static_cast<size_t>(m1.fsmblks), m2.fsmblks);
  EXPECT_EQ(static_cast<size_t>(m1.uordblks), m2.uordblks);
  EXPECT_EQ(static_cast<size_t>(m1.fordblks), m2.fordblks);
  EXPECT_EQ(static_cast<size_t>(m1.keepcost), m2.keepcost);
  free(h);
  free(m);
}

TEST(Mallinfo, IntFieldsSaturate) {
  // 3 GiB of huge block: address space, never touched.
  void* p = opaque(malloc(size_t{3} << 30));
  if (p == nullptr) GTEST_SKIP() << "no 3 GiB of address space here";
  const struct mallinfo2 m2 = mallinfo2();
  const struct mallinfo m1 = ductile_mallinfo();  // mallinfo() is deprecated
  EXPECT_GT(m2.hblkhd, static_cast<size_t>(INT_MAX));
  EXPECT_EQ(m1.hblkhd, INT_MAX);  // glibc's would wrap
  EXPECT_EQ(static_cast<size_t>(m1.hblks), m2.hblks);
  free(p);
}

TEST(Mallinfo, UnprefixedNamesAreTheSameFunctions) {
  EXPECT_EQ(reinterpret_cast<void*>(&mallinfo2), reinterpret_cast<void*>(&ductile_mallinfo2));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_EQ(reinterpret_cast<void*>(&mallinfo), reinterpret_cast<void*>(&ductile_mallinfo));
#pragma GCC diagnostic pop
  EXPECT_EQ(reinterpret_cast<void*>(&malloc_stats), reinterpret_cast<void*>(&ductile_malloc_stats));
  EXPECT_EQ(reinterpret_cast<void*>(&malloc_info), reinterpret_cast<void*>(&ductile_malloc_info));
  EXPECT_EQ(reinterpret_cast<void*>(&mallopt), reinterpret_cast<void*>(&ductile_mallopt));
  EXPECT_EQ(reinterpret_cast<void*>(&free_sized), reinterpret_cast<void*>(&ductile_free_sized));
  EXPECT_EQ(reinterpret_cast<void*>(&free_aligned_sized), reinterpret_cast<void*>(&ductile_free_aligned_sized));
}

// ---- malloc_stats ----------------------------------------------------------

TEST(MallocStats, PrintsTheExitSummaryOnStderr) {
  void* p = opaque(malloc(100));
  testing::internal::CaptureStderr();
  malloc_stats();
  const std::string err = testing::internal::GetCapturedStderr();
  free(p);
  // What DUCTILE_STATS=1 prints at exit: the whole summary, classes included.
  for (const char* want : {"___ Begin ductile statistics ___", "Bytes by layer", "Mapped: ", "Retained: ",
                           "System calls: mmap", "Small classes:", "___ End ductile statistics ___"})
    EXPECT_NE(err.find(want), std::string::npos) << want << "\n" << err;
  EXPECT_EQ(err.find("Arena 0:"), std::string::npos);  // glibc's
  EXPECT_EQ(err.rfind("___ Begin ductile statistics ___", 0), 0u);
}

// A thread whose cancellation is pending (deferred) calls malloc_stats: as
// glibc's, malloc_stats is no cancellation point -- it writes the whole
// summary, returns, and puts the thread's cancel state back as it found it;
// the thread is cancelled at its next cancellation point. (Cancelled inside,
// the thread would unwind through code that cannot be unwound and end the
// process: the scenario runs in a child, which reports what it saw.)
struct CancelSeen {
  int state_before = PTHREAD_CANCEL_ENABLE;  // set by the thread, then it cancels itself
  bool returned = false;      // malloc_stats returned
  int state_after = -1;       // the cancel state it left
  bool ran_past = false;      // the next cancellation point did not end the thread
};

void* stats_while_cancelled(void* arg) {
  CancelSeen* seen = static_cast<CancelSeen*>(arg);
  int ignored;
  (void)pthread_setcancelstate(seen->state_before, &ignored);
  (void)pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &ignored);
  (void)pthread_cancel(pthread_self());  // pending: deferred, or disabled
  malloc_stats();
  seen->returned = true;
  (void)pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &seen->state_after);
  pthread_testcancel();
  seen->ran_past = true;
  return nullptr;
}

// In a child: the thread's run with standard error on a memory file; exits
// 0 when all held, else with a bit for each thing that did not.
[[noreturn]] void stats_cancel_child(int state_before) {
  const int fd = memfd_create("stats", 0);
  if (fd < 0 || dup2(fd, 2) != 2) _exit(64);
  CancelSeen seen;
  seen.state_before = state_before;
  pthread_t t;
  if (pthread_create(&t, nullptr, stats_while_cancelled, &seen) != 0) _exit(64);
  void* result = nullptr;
  if (pthread_join(t, &result) != 0) _exit(64);
  char text[64 * 1024];
  const ssize_t n = pread(fd, text, sizeof text - 1, 0);
  text[n > 0 ? n : 0] = '\0';
  int bad = 0;
  if (!seen.returned) bad |= 1;
  if (std::strstr(text, "___ End ductile statistics ___") == nullptr) bad |= 2;
  if (seen.state_after != state_before) bad |= 4;
  if (seen.ran_past || result != PTHREAD_CANCELED) bad |= 8;
  _exit(bad);
}

TEST(MallocStats, WritesItAllWhileACancellationIsPending) {
  for (int state : {PTHREAD_CANCEL_ENABLE, PTHREAD_CANCEL_DISABLE}) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) stats_cancel_child(state);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status)
                                   << " (cancelled inside malloc_stats?), cancel state " << state;
    const int bad = WEXITSTATUS(status);
    EXPECT_EQ(bad & 1, 0) << "malloc_stats did not return, cancel state " << state;
    EXPECT_EQ(bad & 2, 0) << "the summary was not written whole, cancel state " << state;
    EXPECT_EQ(bad & 4, 0) << "the cancel state was not put back, cancel state " << state;
    EXPECT_EQ(bad & 8, 0) << "the thread was not cancelled after, cancel state " << state;
    EXPECT_NE(bad, 64) << "the child could not set up";
  }
}

// ---- mallopt -----------------------------------------------------------------

struct SavedThreshold {
  size_t t = threshold();
  ~SavedThreshold() { EXPECT_TRUE(core::set_huge_threshold(t)); }
};

TEST(Mallopt, ReturnsWhatGlibcReturns) {
  auto libc_mallopt = from_libc<int (*)(int, int)>("mallopt");
  ASSERT_NE(libc_mallopt, nullptr);
  ASSERT_NE(reinterpret_cast<void*>(libc_mallopt), reinterpret_cast<void*>(&ductile_mallopt));
  SavedThreshold saved;
  const int params[] = {M_MXFAST,    M_TRIM_THRESHOLD, M_TOP_PAD,   M_MMAP_THRESHOLD, M_MMAP_MAX,
                        M_CHECK_ACTION, M_PERTURB,     M_ARENA_TEST, M_ARENA_MAX,     0,
                        2,           3,                4,           5,                -9,
                        12345,       INT_MIN,          INT_MAX};
  const int values[] = {INT_MIN, -1,       0,         1,           64,       159,      160,    161,
                        4096,    1 << 20, 32 << 20, (32 << 20) + 1, 64 << 20, INT_MAX};
  for (int param : params) {
    for (int value : values) {
      if (param != M_MXFAST) {  // refused (MxfastIsRefused)
        EXPECT_EQ(ductile_mallopt(param, value), libc_mallopt(param, value)) << param << " " << value;
      }
    }
  }
  // glibc's own state back to its defaults (its heap is not used here anyway).
  libc_mallopt(M_PERTURB, 0);
  libc_mallopt(M_MMAP_MAX, 65536);
  libc_mallopt(M_MXFAST, 128);
  // And the values themselves, should the C library change.
  EXPECT_EQ(mallopt(M_MMAP_THRESHOLD, -1), 1);
  EXPECT_EQ(mallopt(M_ARENA_MAX, 0), 1);
  EXPECT_EQ(mallopt(12345, 1), 1);
}

TEST(Mallopt, MmapThresholdChangesWhichSizesAreHuge) {
  SavedThreshold saved;
  if (saved.t != kHugePage) GTEST_SKIP() << "a huge threshold other than the default";
  void* before = opaque(malloc(100 * kKiB));
  ASSERT_EQ(kind_of(before), chunk::ExtentKind::kMedium);
  fill(before, 100 * kKiB, 1);

  EXPECT_EQ(mallopt(M_MMAP_THRESHOLD, 64 * kKiB), 1);
  EXPECT_EQ(threshold(), 64 * kKiB);
  EXPECT_EQ(core::g_huge_threshold, 64 * kKiB);
  EXPECT_EQ(core::rt().opts.huge_threshold, 64 * kKiB);
  size_t v = 0, len = sizeof v;
  ASSERT_EQ(ductile_mallctl("opt.huge_threshold", &v, &len, nullptr, 0), 0);
  EXPECT_EQ(v, 64 * kKiB);
  const size_t hblks = mallinfo2().hblks;
  void* huge = opaque(malloc(100 * kKiB));
  EXPECT_EQ(kind_of(huge), chunk::ExtentKind::kHuge);
  EXPECT_EQ(mallinfo2().hblks, hblks + 1);
  EXPECT_EQ(ductile_malloc_usable_size(huge), ductile_nallocx(100 * kKiB, 0));
  fill(huge, 100 * kKiB, 2);
  void* medium = opaque(malloc(60 * kKiB));
  EXPECT_EQ(kind_of(medium), chunk::ExtentKind::kMedium);
  // A block made before is still medium; grown, it is a new request.
  EXPECT_EQ(kind_of(before), chunk::ExtentKind::kMedium);
  before = realloc(before, 120 * kKiB);
  ASSERT_NE(before, nullptr);
  EXPECT_EQ(kind_of(before), chunk::ExtentKind::kHuge);
  EXPECT_TRUE(check(before, 100 * kKiB, 1));

  // Out of the option's range: brought into it, as glibc accepts any value.
  EXPECT_EQ(mallopt(M_MMAP_THRESHOLD, 0), 1);
  EXPECT_EQ(threshold(), align_up(small::kMaxSmall + 1, kPage));
  void* tiny_huge = opaque(malloc(small::kMaxSmall + kPage));
  EXPECT_EQ(kind_of(tiny_huge), chunk::ExtentKind::kHuge);
  void* slab = opaque(malloc(test::request_for_block(small::kMaxSmall)));
  EXPECT_EQ(kind_of(slab), chunk::ExtentKind::kSlab);
  EXPECT_EQ(mallopt(M_MMAP_THRESHOLD, -1), 1);
  EXPECT_EQ(threshold(), small::kMaxClassSize);
  void* big_medium = opaque(malloc(3 * kMiB));
  EXPECT_EQ(kind_of(big_medium), chunk::ExtentKind::kMedium);
  fill(big_medium, 3 * kMiB, 3);
  EXPECT_EQ(mallopt(M_MMAP_THRESHOLD, INT_MAX), 1);
  EXPECT_EQ(threshold(), small::kMaxClassSize);
  EXPECT_EQ(mallopt(M_MMAP_THRESHOLD, 3 * kMiB + 1), 1);
  EXPECT_EQ(threshold(), 3 * kMiB + kPage);

  // Back to the default: blocks of every range made meanwhile resize and free.
  EXPECT_EQ(mallopt(M_MMAP_THRESHOLD, static_cast<int>(saved.t)), 1);
  EXPECT_EQ(threshold(), saved.t);
  huge = realloc(huge, 200 * kKiB);
  ASSERT_NE(huge, nullptr);
  EXPECT_EQ(kind_of(huge), chunk::ExtentKind::kMedium);
  EXPECT_TRUE(check(huge, 100 * kKiB, 2));
  big_medium = realloc(big_medium, 5 * kMiB);
  ASSERT_NE(big_medium, nullptr);
  EXPECT_EQ(kind_of(big_medium), chunk::ExtentKind::kHuge);
  EXPECT_TRUE(check(big_medium, 3 * kMiB, 3));
  for (void* p : {before, huge, medium, tiny_huge, slab, big_medium}) free(p);
  EXPECT_EQ(mallinfo2().hblks, hblks);
}

// M_MXFAST sets the largest size glibc keeps in its fast bins; 0 turns
// them off, and mallinfo's smblks (free blocks in fast bins) is 0 after
// (glibc's tst-mxfast). ductile has no such cache to size or turn off --
// smblks counts free objects in its slabs -- so it refuses M_MXFAST with 0,
// whatever the value, rather than accept one that mallinfo would contradict.
TEST(Mallopt, MxfastIsRefused) {
  for (int value : {0, 1, 64, 160, 161, -1, INT_MAX}) EXPECT_EQ(mallopt(M_MXFAST, value), 0) << value;
  // What a program that sets it may then rely on, as glibc's test does.
  const int accepted = mallopt(M_MXFAST, 0);
  void* p1 = opaque(malloc(3));
  void* p2 = opaque(malloc(512));
  free(p1);
  if (accepted == 1) {
    EXPECT_EQ(mallinfo2().smblks, 0u) << "mallopt(M_MXFAST, 0) accepted";
  }
  free(p2);
}

TEST(Mallopt, OtherParametersChangeNothing) {
  SavedThreshold saved;
  auto options = [] {
    std::string all;
    char val[64];
    for (size_t i = 0; i < core::option_count(); i++) {
      EXPECT_TRUE(core::option_to_string(core::rt().opts, core::option_name(i), val, sizeof val));
      all += std::string(core::option_name(i)) + ":" + val + ",";
    }
    return all;
  };
  const std::string before = options();
  const size_t nbinsets = core::rt().nbinsets;
  for (int param : {M_MXFAST, M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX, M_CHECK_ACTION, M_PERTURB, M_ARENA_TEST,
                    M_ARENA_MAX, 12345})
    for (int value : {0, 1, 4, 1 << 20})
      (void)mallopt(param, value);
  EXPECT_EQ(options(), before);
  EXPECT_EQ(core::rt().nbinsets, nbinsets);
  EXPECT_EQ(threshold(), saved.t);
  // glibc's M_PERTURB fills freed and new blocks; ductile's changes nothing.
  // The block comes back with the bytes it was freed with -- or, in a
  // hardened build, for the one free in freed_fill that the sample fills,
  // with ductile's own fill past its first word (small/bin.h), which the
  // hand-out checks and leaves. Neither is glibc's perturb byte.
  EXPECT_EQ(mallopt(M_PERTURB, 0x5a), 1);
  for (int round = 0; round < 256; round++) {
    unsigned char* p = static_cast<unsigned char*>(opaque(malloc(64)));
    std::memset(opaque(p), 0, 64);  // not a dead store before free, to the compiler
    free(p);
    unsigned char* q = static_cast<unsigned char*>(opaque(malloc(64)));
    ASSERT_EQ(q, p);  // the same block, from this thread's cache
    const unsigned char fill = kHardened && q[8] == static_cast<unsigned char>(small::kFreedFill) ? q[8] : 0;
    for (size_t i = 0; i < 64; i++)
      ASSERT_EQ(q[i], i < 8 ? 0 : fill) << "byte " << i << ", round " << round;
    free(q);
  }
}

// ---- the __libc_ names --------------------------------------------------------

TEST(LibcNames, AreDuctilesFunctions) {
  EXPECT_EQ(reinterpret_cast<void*>(&__libc_malloc), reinterpret_cast<void*>(&ductile_malloc));
  EXPECT_EQ(reinterpret_cast<void*>(&__libc_free), reinterpret_cast<void*>(&ductile_free));
  EXPECT_EQ(reinterpret_cast<void*>(&__libc_calloc), reinterpret_cast<void*>(&ductile_calloc));
  EXPECT_EQ(reinterpret_cast<void*>(&__libc_realloc), reinterpret_cast<void*>(&ductile_realloc));
  EXPECT_EQ(reinterpret_cast<void*>(&__libc_memalign), reinterpret_cast<void*>(&ductile_memalign));
  EXPECT_EQ(reinterpret_cast<void*>(&__libc_valloc), reinterpret_cast<void*>(&ductile_valloc));
  EXPECT_EQ(reinterpret_cast<void*>(&__libc_pvalloc), reinterpret_cast<void*>(&ductile_pvalloc));
  // The C library's own are other functions, reachable past this program.
  EXPECT_NE(from_libc<void*>("__libc_malloc"), nullptr);
  EXPECT_NE(from_libc<void*>("__libc_malloc"), reinterpret_cast<void*>(&ductile_malloc));
}

TEST(LibcNames, BehaveAsTheStandardNames) {
  void* m = __libc_malloc(100);
  ASSERT_NE(core::owner_of(m), nullptr);
  fill(m, 100, 4);
  m = __libc_realloc(m, 5000);
  ASSERT_NE(core::owner_of(m), nullptr);
  EXPECT_TRUE(check(m, 100, 4));
  EXPECT_EQ(__libc_realloc(m, 0), nullptr);  // frees, as realloc(p, 0)
  unsigned char* c = static_cast<unsigned char*>(__libc_calloc(1000, 3));
  ASSERT_NE(core::owner_of(c), nullptr);
  for (size_t i = 0; i < 3000; i++) ASSERT_EQ(c[i], 0) << i;
  errno = 0;
  EXPECT_EQ(__libc_calloc(SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  __libc_free(c);
  void* a = __libc_memalign(4096, 100);
  EXPECT_TRUE(is_aligned(addr(a), 4096));
  EXPECT_NE(core::owner_of(a), nullptr);
  void* r = __libc_memalign(48, 10);  // rounded up to 64, as memalign
  EXPECT_TRUE(is_aligned(addr(r), 64));
  void* v = __libc_valloc(10);
  EXPECT_TRUE(is_aligned(addr(v), kPage));
  void* pv = __libc_pvalloc(1);
  EXPECT_TRUE(is_aligned(addr(pv), kPage));
  EXPECT_GE(ductile_malloc_usable_size(pv), kPage);
  for (void* p : {a, r, v, pv}) __libc_free(p);
  // A huge block through them, and back.
  const size_t hblks = mallinfo2().hblks;
  void* h = __libc_malloc(4 * kMiB);
  EXPECT_EQ(mallinfo2().hblks, hblks + 1);
  __libc_free(h);
  EXPECT_EQ(mallinfo2().hblks, hblks);
  __libc_free(nullptr);
}

// ---- free_sized / free_aligned_sized -----------------------------------------

uint64_t huge_frees() { return core::rt().huge.stats().frees; }

// Frees p (a block of `size` bytes) with `release`, and shows that the
// block went back: a huge one to the huge layer; any other to this thread's
// cache, which hands it out again for the next request of its class.
template <typename Release>
void expect_released(void* p, size_t size, Release release) {
  ASSERT_NE(p, nullptr) << size;
  const bool huge = kind_of(p) == chunk::ExtentKind::kHuge;
  // The request that gets this class (a hardened build's: the block's size
  // less its seal, small/seal.h).
  const size_t usable = kHardened && !huge ? test::request_for_block(core::usable_of(core::owner_of(p)))
                                           : ductile_malloc_usable_size(p);
  const uint64_t frees = huge_frees();
  const size_t hblks = mallinfo2().hblks;
  uint64_t deallocated = 0;
  size_t n = sizeof deallocated;
  if (kStats) {
    ASSERT_EQ(ductile_mallctl("thread.deallocated", &deallocated, &n, nullptr, 0), 0);
  }
  release(p);
  if (kStats) {
    uint64_t now = 0;
    ASSERT_EQ(ductile_mallctl("thread.deallocated", &now, &n, nullptr, 0), 0);
    EXPECT_GE(now - deallocated, size) << size;
  }
  if (huge) {
    EXPECT_EQ(huge_frees(), frees + 1) << size;
    EXPECT_EQ(mallinfo2().hblks, hblks - 1) << size;
    EXPECT_EQ(core::owner_of(p), nullptr) << size;
  } else {
    void* q = malloc(usable);
    EXPECT_EQ(q, p) << size;
    free(q);
  }
}

const size_t kSizes[] = {1,         8,         24,         100,      1000,      4096,    small::kMaxSmall,
                         20 * kKiB, 64 * kKiB, 300 * kKiB, 1 * kMiB, 2 * kMiB, 5 * kMiB + 3};

TEST(FreeSized, ReleasesBlocksOfEveryRange) {
  for (size_t size : kSizes) {
    void* p = malloc(size);
    fill(p, size, 5);
    expect_released(p, size, [size](void* b) { free_sized(b, size); });
    void* c = calloc(size, 1);
    expect_released(c, size, [size](void* b) { free_sized(b, size); });
    // A grown block, freed with its new size.
    void* r = realloc(malloc(1), size);
    expect_released(r, size, [size](void* b) { free_sized(b, size); });
  }
  free_sized(nullptr, 0);
  free_sized(nullptr, 123);
}

TEST(FreeAlignedSized, ReleasesAlignedBlocks) {
  for (size_t align : {size_t{8}, size_t{16}, size_t{64}, size_t{4096}, 64 * kKiB, 2 * kMiB, 8 * kMiB}) {
    for (size_t size : {align, 3 * align, align * 40}) {
      void* p = aligned_alloc(align, size);
      ASSERT_TRUE(is_aligned(addr(p), align));
      expect_released(p, size, [align, size](void* b) { free_aligned_sized(b, align, size); });
    }
  }
  free_aligned_sized(nullptr, 64, 64);
}

TEST(FreeSized, AWrongSizeDoesNotCorrupt) {
  if (kHardened) GTEST_SKIP() << "a hardened build ends the program instead (hardening_test)";
  // Undefined by C23; here the size is not used, so nothing breaks.
  for (size_t size : {16ul, 5000ul, 3 * kMiB})
    for (size_t lie : {size_t{0}, size / 2, size * 3, SIZE_MAX}) {
      free_sized(malloc(size), lie);
      free_aligned_sized(aligned_alloc(64, size), 4096, lie);
    }
  std::vector<void*> live;
  for (unsigned i = 0; i < 500; i++) {
    live.push_back(malloc(16 + i * 97 % 50000));
    fill(live.back(), 16, i);
  }
  for (unsigned i = 0; i < live.size(); i++) {
    EXPECT_TRUE(check(live[i], 16, i)) << i;
    free_sized(live[i], 16 + i * 97 % 50000);
  }
}

}  // namespace
}  // namespace ductile
