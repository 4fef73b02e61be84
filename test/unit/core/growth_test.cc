// SPDX-License-Identifier: BSD-2-Clause
// How blocks grow (core/growth.cc): each way of growth counted, with the
// bytes grown and copied (ductile.growth.*), across threads and without a
// cache; and the growth profile, which names the call site that copied and
// not the one that grew in place.
//
// The runtime's OS layer runs over a fake kernel (this program defines
// core::runtime_kernel()), so that a huge block's move can be made to copy
// (mremap refused). The program runs itself again with DUCTILE_CONF set
// (the options are read at the first allocation), sampling every growth
// event (lg_growth_sample:0) so that each check is exact. It links the
// library's objects, so ductile is the allocator of the whole test process,
// and it is linked with -rdynamic, so that dladdr names its functions.
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/prof.h"
#include "core/runtime.h"
#include "ductile/ductile.h"
#include "support/fake_kernel.h"
#include "support/patterns.h"
#include "support/run_again.h"

namespace ductile {

namespace {
alignas(test::FakeKernel) unsigned char g_kernel_storage[sizeof(test::FakeKernel)];
test::FakeKernel* g_kernel = nullptr;
std::string g_dir;  // where the dumps go
}  // namespace

namespace core {
// Replaces the library's weak definition: the runtime runs over the fake
// kernel, which keeps no call log (it would allocate inside the allocator).
os::Kernel& runtime_kernel() noexcept {
  auto* k = new (g_kernel_storage) test::FakeKernel();
  k->log_calls = false;
  g_kernel = k;
  return *k;
}
}  // namespace core

namespace {

constexpr size_t kMiB = size_t{1} << 20;

test::FakeKernel& kernel() {
  if (g_kernel == nullptr) (void)core::ensure_ready();
  return *g_kernel;
}

// The process's counters, read through mallctl.
struct Grew {
  uint64_t way[6];
  uint64_t copied;
};
constexpr const char* kWays[] = {"in_place", "headroom", "neighbour", "fixed_map", "mremap", "copy"};

uint64_t read_u64(const char* name) {
  uint64_t v = 0;
  size_t len = sizeof v;
  EXPECT_EQ(ductile_mallctl(name, &v, &len, nullptr, 0), 0) << name;
  return v;
}

// Zeroes in a build without the counters (--disable-stats).
Grew grew() {
  Grew g{};
  if (!kStats) return g;
  for (size_t i = 0; i < 6; i++) g.way[i] = read_u64((std::string("ductile.growth.") + kWays[i]).c_str());
  g.copied = read_u64("ductile.growth.copied_bytes");
  return g;
}

// What changed from `a` to `b`, as "copy 1, copied 16".
std::string diff(const Grew& a, const Grew& b) {
  std::ostringstream o;
  for (size_t i = 0; i < 6; i++)
    if (b.way[i] != a.way[i]) o << kWays[i] << ' ' << b.way[i] - a.way[i] << ", ";
  o << "copied " << b.copied - a.copied;
  return o.str();
}

// Two huge blocks, the second right after the first's span, so that the
// first cannot grow past its headroom in place. Fills *a and *b. Where the
// heap's earlier blocks left a hole that takes the second, the pair is
// kept (so that the hole stays filled) and another one made.
void blocked_pair(void** a, void** b) {
  std::vector<void*> holes;
  *a = *b = nullptr;
  for (int tries = 0; tries < 32 && *a == nullptr; tries++) {
    void* x = ductile_malloc(4 * kMiB);
    void* y = ductile_malloc(4 * kMiB);
    ASSERT_NE(x, nullptr);
    ASSERT_NE(y, nullptr);
    chunk::Extent* ex = core::rt().chunks.lookup(x);
    chunk::Extent* ey = core::rt().chunks.lookup(y);
    ASSERT_NE(ex, nullptr);
    ASSERT_NE(ey, nullptr);
    if (ey->base == ex->end()) {
      *a = x;
      *b = y;
    } else {
      holes.push_back(x);
      holes.push_back(y);
    }
  }
  for (void* p : holes) ductile_free(p);
  ASSERT_NE(*a, nullptr) << "no huge block's span was followed by the next one's";
}

}  // namespace
}  // namespace ductile

// The call sites the profile must tell apart (extern and not inlined, so
// that dladdr names the frames in them; the barrier after the call keeps it
// from being a tail call, which would leave no frame of theirs).
extern "C" __attribute__((noinline)) void* growth_test_copy_site(void* p, size_t size) {
  void* q = ductile_realloc(p, size);
  __asm__ volatile("" ::: "memory");
  return q;
}
extern "C" __attribute__((noinline)) size_t growth_test_in_place_site(void* p, size_t size) {
  const size_t n = ductile_xallocx(p, size, 0, 0);
  __asm__ volatile("" ::: "memory");
  return n;
}

namespace ductile {
namespace {

TEST(Growth, OptionsAndNames) {
  bool on = false;
  size_t len = sizeof on;
  ASSERT_EQ(ductile_mallctl("opt.growth_prof", &on, &len, nullptr, 0), 0);
  EXPECT_TRUE(on);
  size_t lg = 99;
  len = sizeof lg;
  ASSERT_EQ(ductile_mallctl("opt.lg_growth_sample", &lg, &len, nullptr, 0), 0);
  EXPECT_EQ(lg, 0u);
  uint64_t v = 1;
  EXPECT_EQ(ductile_mallctl("ductile.growth.copy", nullptr, nullptr, &v, sizeof v), kStats ? EPERM : ENOENT);
}

// A build without statistics counts no growth: the counters are absent,
// not zero.
TEST(Growth, ABuildWithoutStatisticsHasNoCounters) {
  if (kStats) GTEST_SKIP() << "--disable-stats only";
  uint64_t v = 0;
  size_t len = sizeof v;
  EXPECT_EQ(ductile_mallctl("ductile.growth.copy", &v, &len, nullptr, 0), ENOENT);
  EXPECT_EQ(ductile_mallctl("ductile.growth.copied_bytes", &v, &len, nullptr, 0), ENOENT);
}

TEST(Growth, ASmallBlockThatOutgrowsItsClassIsCopied) {
  if (!kStats) GTEST_SKIP() << "--disable-stats";
  void* p = ductile_malloc(16);
  ASSERT_NE(p, nullptr);
  test::fill(p, 16, 1);
  Grew before = grew();
  void* q = ductile_realloc(p, 16);  // no growth: nothing counted
  ASSERT_EQ(q, p);
  Grew after = grew();
  EXPECT_EQ(diff(before, after), "copied 0");
  q = ductile_realloc(p, 1000);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(test::check(q, 16, 1));
  after = grew();
  EXPECT_EQ(diff(before, after), "copy 1, copied 16");  // into the 1 KiB class
  ductile_free(q);
}

TEST(Growth, AMediumBlockGrowsInPlaceOrIsCopied) {
  if (!kStats) GTEST_SKIP() << "--disable-stats";
  void* p = ductile_malloc(20 * 1024);
  ASSERT_NE(p, nullptr);
  const size_t old = ductile_malloc_usable_size(p);
  const Grew before = grew();
  void* q = ductile_realloc(p, 40 * 1024);
  ASSERT_NE(q, nullptr);
  if (q == p)
    EXPECT_EQ(diff(before, grew()), "in_place 1, copied 0");
  else
    EXPECT_EQ(diff(before, grew()), "copy 1, copied " + std::to_string(old));
  ductile_free(q);
}

TEST(Growth, AHugeBlockGrowsIntoItsHeadroom) {
  if (!kStats) GTEST_SKIP() << "--disable-stats";
  void* p = ductile_malloc(4 * kMiB);
  ASSERT_NE(p, nullptr);
  const uint64_t huge_before = read_u64("ductile.huge.growth.headroom");
  const Grew before = grew();
  ASSERT_EQ(growth_test_in_place_site(p, 6 * kMiB), 6 * kMiB);
  EXPECT_EQ(diff(before, grew()), "headroom 1, copied 0");
  EXPECT_EQ(read_u64("ductile.huge.growth.headroom"), huge_before + 1);
  ductile_free(p);
  // A growth that cannot be had in place is no growth.
  void* small = ductile_malloc(100);
  ASSERT_NE(small, nullptr);
  const Grew still = grew();
  EXPECT_EQ(ductile_xallocx(small, 100 * 1024, 0, 0), 112u);
  EXPECT_EQ(diff(still, grew()), "copied 0");
  ductile_free(small);
}

// A huge block boxed in by its neighbour grows to 64 MiB by a move: its
// pages move (mremap), or, where the kernel refuses that, it is copied.
// Returns what changed in the counters.
std::string grow_boxed_in(bool refuse_mremap, unsigned seed) {
  void *a, *b;
  blocked_pair(&a, &b);
  if (a == nullptr) return "no pair";
  test::fill(a, 4 * kMiB, seed);
  const Grew before = grew();
  if (refuse_mremap) kernel().fail(test::Sys::kMremap, ENOMEM);
  void* q = ductile_realloc(a, 64 * kMiB);
  kernel().clear_failures();
  const Grew after = grew();
  EXPECT_NE(q, nullptr);
  EXPECT_NE(q, a);
  EXPECT_TRUE(q != nullptr && test::check(q, 4 * kMiB, seed));
  ductile_free(q);
  ductile_free(b);
  return diff(before, after);
}

// (Without the counters, the block's bytes are still checked.)
TEST(Growth, AHugeBlockBlockedByItsNeighbourMovesItsPages) {
  EXPECT_EQ(grow_boxed_in(false, 2), kStats ? "mremap 1, copied 0" : "copied 0");
}

TEST(Growth, AHugeBlockWhosePagesCannotMoveIsCopied) {
  EXPECT_EQ(grow_boxed_in(true, 3), kStats ? "copy 1, copied 4194304" : "copied 0");
}

TEST(Growth, ThreadsCountIntoTheTotalsAlsoAfterTheyExit) {
  if (!kStats) GTEST_SKIP() << "--disable-stats";
  const Grew before = grew();
  auto work = [](bool cached) {
    if (!cached) {
      bool off = false;
      ASSERT_EQ(ductile_mallctl("thread.tcache.enabled", nullptr, nullptr, &off, sizeof off), 0);
    }
    for (int i = 0; i < 100; i++) {
      void* p = ductile_malloc(16);
      void* q = ductile_realloc(p, 1000);
      ductile_free(q);
    }
  };
  std::thread t1(work, true), t2(work, true), t3(work, false);
  t1.join();
  t2.join();
  t3.join();
  EXPECT_EQ(diff(before, grew()), "copy 300, copied 4800");
}

// One line of a growth profile: its counts and the functions of its frames.
struct Line {
  uint64_t copies, copied, events, grown;
  std::vector<std::string> functions;  // innermost first
};

// The function a profile's frame lies in. The innermost frame is a return
// address into the caller like the rest (ductile's own frames are left off
// only where it is a library), so each is looked up one byte before it, as
// google-pprof does.
std::string function_at(uintptr_t pc) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(pc - 1), &info) == 0 || info.dli_sname == nullptr) return "?";
  return info.dli_sname;
}

std::vector<Line> read_profile(const std::string& path) {
  std::ifstream in(path);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("heap profile: ", 0), 0u) << header;
  EXPECT_NE(header.find("@ heapprofile"), std::string::npos) << header;
  std::vector<Line> lines;
  std::string text;
  while (std::getline(in, text) && !text.empty()) {
    Line l{};
    std::istringstream s(text);
    char c;
    s >> l.copies >> c >> l.copied >> c >> l.events >> c >> l.grown >> c >> c;
    std::string frame;
    while (s >> frame) l.functions.push_back(function_at(std::stoull(frame, nullptr, 16)));
    lines.push_back(l);
  }
  return lines;
}

bool names(const Line& l, const std::string& fn) {
  for (const auto& f : l.functions)
    if (f == fn) return true;
  return false;
}

TEST(Growth, TheProfileNamesTheCallSiteThatCopiedAndNotTheOneThatGrewInPlace) {
  if (!kProf) GTEST_SKIP() << "--disable-prof";
  core::prof::set_whole_stacks(true);  // the test's frames are in the allocator's text
  // In place: a huge block's headroom.
  void* p = ductile_malloc(4 * kMiB);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(growth_test_in_place_site(p, 5 * kMiB), 5 * kMiB);
  // A copy: a huge block boxed in by its neighbour, mremap refused.
  void *a, *b;
  blocked_pair(&a, &b);
  kernel().fail(test::Sys::kMremap, ENOMEM);
  void* q = growth_test_copy_site(a, 64 * kMiB);
  kernel().clear_failures();
  ASSERT_NE(q, nullptr);

  const std::string path = g_dir + "/named.growth";
  const char* name = path.c_str();
  core::prof::set_whole_stacks(false);
  ASSERT_EQ(ductile_mallctl("prof.growth.dump", nullptr, nullptr, &name, sizeof name), 0);
  uint64_t copy_lines = 0, in_place_lines = 0;
  for (const Line& l : read_profile(path)) {
    ASSERT_FALSE(l.functions.empty());
    if (names(l, "growth_test_copy_site")) {
      copy_lines++;
      EXPECT_EQ(l.functions.back(), "ductile_grew_by_copy");
      EXPECT_EQ(l.copies, 1u);
      EXPECT_EQ(l.copied, 4 * kMiB);
      EXPECT_EQ(l.events, 1u);
      EXPECT_EQ(l.grown, 60 * kMiB);  // the size asked for beyond the old usable size
    }
    if (names(l, "growth_test_in_place_site")) {
      in_place_lines++;
      EXPECT_EQ(l.functions.back(), "ductile_grew_by_headroom");
      EXPECT_EQ(l.copies, 0u) << "a site that grew in place copied nothing";
      EXPECT_EQ(l.copied, 0u);
      EXPECT_EQ(l.events, 1u);
    }
  }
  EXPECT_EQ(copy_lines, 1u);
  EXPECT_EQ(in_place_lines, 1u);
  ductile_free(p);
  ductile_free(q);
  ductile_free(b);
}

TEST(Growth, TheDumpWithoutANameTakesThePrefix) {
  if (!kProf) GTEST_SKIP() << "--disable-prof";
  ASSERT_EQ(ductile_mallctl("prof.growth.dump", nullptr, nullptr, nullptr, 0), 0);
  const std::string want = g_dir + "/g." + std::to_string(getpid()) + ".";
  bool found = false;
  for (int seq = 0; seq < 8 && !found; seq++)
    found = access((want + std::to_string(seq) + ".m0.growth").c_str(), R_OK) == 0;
  EXPECT_TRUE(found) << want << "<seq>.m0.growth";
}

}  // namespace
}  // namespace ductile

int main(int argc, char** argv) {
  const int status = ductile::test::run_again_with_conf(
      argv, "DUCTILE_GROWTH_TEST_DIR", "ductile-growth-test",
      "growth_prof:true,lg_growth_sample:0,background_thread:false,prof_prefix:", "/g");
  if (status >= 0) return status;
  ductile::g_dir = getenv("DUCTILE_GROWTH_TEST_DIR");
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
