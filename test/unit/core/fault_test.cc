// SPDX-License-Identifier: BSD-2-Clause
// Fault injection through the whole API (a cross-cutting suite, kept by its concern under core/):
// the N-th memory system call refused, for every N.
//
// The runtime's OS layer runs over a fake kernel (this program defines
// core::runtime_kernel()), and each case is run once for every N, with the
// N-th memory system call (mmap, munmap, mprotect, mremap, madvise,
// process_madvise) failing with ENOMEM, until a run makes fewer than N
// calls. After each run:
//  * a call that failed returned NULL (or its documented error) with errno
//    ENOMEM, and only where a fault was injected;
//  * a call that succeeded gave what it promised (size, alignment, zeroes,
//    the old contents), and a block that a failed call kept is intact;
//  * once everything is freed and trimmed, the chunk layer's active bytes,
//    the slab arena's regions and the huge layer's bytes are back where
//    they were (nothing leaked);
//  * the next calls, without faults, work.
// Like core_test, the allocator's objects are linked in: ductile is also the
// allocator of this process, so the kernel keeps no call log (it would
// allocate from inside the allocator).
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"
#include "support/fake_kernel.h"
#include "support/maps.h"
#include "support/patterns.h"

namespace ductile {

namespace {
alignas(test::FakeKernel) unsigned char g_kernel_storage[sizeof(test::FakeKernel)];
test::FakeKernel* g_kernel = nullptr;
}  // namespace

namespace core {
// Replaces the library's weak definition: the runtime's OS layer runs over
// the fake kernel. Called once, while the runtime is made (before main).
// DUCTILE_FAULT_MODE picks the kernel's answers: "strict" (overcommit 2:
// commit is mprotect, decommit an mmap) or "limit" (RLIMIT_AS 64 MiB, not
// enforced: reservations of 4 MiB, so that most huge blocks map one of
// their own, and a refused one unmaps the free extents and tries again);
// anything else, normal mode. "hardened" and "hardened_strict" are normal
// and strict with hardened:true (main sets it), whose huge blocks end at a
// guard: the guards' mprotect and mmap calls fail in turn too.
os::Kernel& runtime_kernel() noexcept {
  auto* k = new (g_kernel_storage) test::FakeKernel();
  k->log_calls = false;
  const char* mode = std::getenv("DUCTILE_FAULT_MODE");
  if (mode != nullptr && (std::strcmp(mode, "strict") == 0 || std::strcmp(mode, "hardened_strict") == 0))
    k->overcommit = "2\n";
  if (mode != nullptr && std::strcmp(mode, "limit") == 0) k->as_limit = size_t{64} << 20;
  g_kernel = k;
  return *k;
}
}  // namespace core

namespace {

using test::check;
using test::fill;

// The runtime (and with it the kernel) is made by the first allocation --
// before main where ductile is the program's allocator, here otherwise.
test::FakeKernel& kernel() {
  if (g_kernel == nullptr) (void)core::ensure_ready();
  return *g_kernel;
}

// Fails the n-th memory system call from construction until stop().
class Injection {
 public:
  explicit Injection(uint64_t n) { kernel().fail_nth(n); }
  ~Injection() { stop(); }
  void stop() {
    if (stopped_) return;
    injected_ = kernel().fault_injected();
    kernel().fail_nth(0);
    stopped_ = true;
  }
  bool injected() const { return injected_; }

 private:
  bool stopped_ = false;
  bool injected_ = false;
};

// What must come back to where it was once everything is freed.
struct Held {
  size_t chunk_active;
  size_t regions;
  size_t huge_bytes;
  bool operator==(const Held& o) const {
    return chunk_active == o.chunk_active && regions == o.regions && huge_bytes == o.huge_bytes;
  }
};

std::ostream& operator<<(std::ostream& os, const Held& h) {
  return os << "{chunk active " << h.chunk_active << ", regions " << h.regions << ", huge " << h.huge_bytes << "}";
}

// Flushes the thread cache, releases empty slabs and purges (no faults).
Held settle() {
  (void)core::trim();
  return {core::rt().chunks.stats().active, core::rt().arena.stats().regions, core::rt().huge.stats().active_bytes};
}

struct Totals {
  uint64_t cases = 0;   // runs, one per case and N
  uint64_t faults = 0;  // runs in which the N-th call was failed
};
Totals g_totals;

// Runs `one(n)` for n = 1, 2, ... until a run makes fewer than n memory
// calls (one() returns whether the fault was injected). Each run is made in
// a child process, from the state this process is in -- which never runs a
// case itself, so every run starts where the first did, its huge-page space
// not yet reserved, and reaches the paths that call the kernel. The child
// checks for leaks and that the allocator still works after the fault.
template <typename F>
void sweep(const char* name, F one) {
  constexpr uint64_t kMaxCalls = 2000;  // a case that makes more calls loops
  uint64_t n = 1;
  for (; n <= kMaxCalls; n++) {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      Held before = settle();
      bool injected = one(n);
      Held after = settle();
      EXPECT_EQ(after, before) << name << ": leaked with call " << n << " failed";
      for (size_t size : {size_t{100}, 3 * kHugePage}) {
        void* p = ductile_malloc(size);
        EXPECT_NE(p, nullptr) << name << ": malloc after call " << n << " failed";
        if (p != nullptr) {
          fill(p, 100, 5);
          EXPECT_TRUE(check(p, 100, 5));
          if (core::g_hardened && size >= kHugePage) {  // still guarded
            const uintptr_t end = addr(p) + ductile_malloc_usable_size(p);
            EXPECT_EQ(test::open_bytes(end, end + kPage), 0u) << name << ": no guard after call " << n;
          }
        }
        ductile_free(p);
      }
      std::fflush(stdout);
      _exit(::testing::Test::HasFailure() ? 1 : injected ? 2 : 0);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    g_totals.cases++;
    if (!WIFEXITED(st) || WEXITSTATUS(st) == 1) {
      ADD_FAILURE() << name << ": the run with call " << n << " failed "
                    << (WIFSIGNALED(st) ? "died of a signal" : "(see above)");
      return;
    }
    if (WEXITSTATUS(st) == 0) break;
    g_totals.faults++;
  }
  EXPECT_LE(n, kMaxCalls) << name;
  if (std::getenv("FAULT_VERBOSE")) std::printf("%s: %llu calls\n", name, static_cast<unsigned long long>(n - 1));
}

// A failed allocation: NULL (checked by the caller) with ENOMEM, and only
// because a call was failed.
void expect_refused(const char* name, uint64_t n, bool injected, int err) {
  EXPECT_TRUE(injected) << name << ": NULL without a fault (call " << n << ")";
  EXPECT_EQ(err, ENOMEM) << name << ": call " << n;
}

// A block that an allocation returned: aligned, as large as asked, zeroed
// where promised, and writable.
void expect_block(const char* name, uint64_t n, void* p, size_t size, size_t align, bool zero) {
  EXPECT_EQ(addr(p) % align, 0u) << name << ": call " << n;
  size_t usable = ductile_malloc_usable_size(p);
  EXPECT_GE(usable, size) << name << ": call " << n;
  if (zero) {
    EXPECT_TRUE(test::all_zero(p, 0, size)) << name << ": call " << n;
  }
  fill(p, size, 77);
  EXPECT_TRUE(check(p, size, 77)) << name << ": call " << n;
}

enum class Alloc { kMalloc, kCalloc, kPosixMemalign, kAlignedAlloc, kMemalign, kValloc, kPvalloc, kMallocx,
                   kMallocxZero, kMallocxAlign, kMallocxNoCache, kNew };

const char* alloc_name(Alloc a) {
  static const char* const kNames[] = {"malloc",  "calloc",  "posix_memalign", "aligned_alloc",
                                       "memalign", "valloc",  "pvalloc",        "mallocx",
                                       "mallocx(ZERO)", "mallocx(ALIGN)", "mallocx(TCACHE_NONE)", "new"};
  return kNames[static_cast<int>(a)];
}

// Sizes from every range: small, medium, huge and a large huge block.
constexpr size_t kSizes[] = {24, 5000, 200 * 1024, 3 * kHugePage + 123, 9 << 20};

// One allocation of `size` by `how` with the n-th call failing (sweep()
// has just flushed the thread cache and purged, so the request reaches the
// layers below the cache).
bool alloc_case(Alloc how, size_t size, uint64_t n) {
  const char* name = alloc_name(how);
  size_t align = alignof(max_align_t);
  bool zero = false;
  Injection inj(n);
  void* p = nullptr;
  int err = 0;
  errno = 0;
  switch (how) {
    case Alloc::kMalloc: p = ductile_malloc(size); break;
    case Alloc::kCalloc: p = ductile_calloc(size, 1), zero = true; break;
    case Alloc::kPosixMemalign:
      align = 4 * kHugePage;
      err = ductile_posix_memalign(&p, align, size);
      break;
    case Alloc::kAlignedAlloc: align = 64; p = ductile_aligned_alloc(align, size); break;
    case Alloc::kMemalign: align = kPage * 4; p = ductile_memalign(align, size); break;
    case Alloc::kValloc: align = kPage; p = ductile_valloc(size); break;
    case Alloc::kPvalloc: align = kPage; p = ductile_pvalloc(size); break;
    case Alloc::kMallocx: p = ductile_mallocx(size, 0); break;
    case Alloc::kMallocxZero: p = ductile_mallocx(size, MALLOCX_ZERO), zero = true; break;
    case Alloc::kMallocxAlign: align = kHugePage; p = ductile_mallocx(size, MALLOCX_ALIGN(kHugePage)); break;
    case Alloc::kMallocxNoCache: p = ductile_mallocx(size, MALLOCX_TCACHE_NONE); break;
    case Alloc::kNew:
#ifdef DUCTILE_SANITIZE
      return false;  // the sanitizer's operator new, not ours
#else
      p = ::operator new(size, std::nothrow);
      break;
#endif
  }
  if (how != Alloc::kPosixMemalign) err = errno;
  inj.stop();
  if (p == nullptr) {
    expect_refused(name, n, inj.injected(), err);
    return inj.injected();
  }
  if (how == Alloc::kPosixMemalign) {
    EXPECT_EQ(err, 0) << name;
  }
  expect_block(name, n, p, size, align, zero);
  ductile_free(p);
  return inj.injected();
}

TEST(FaultSweep, EveryAllocationFunction) {
  for (int h = 0; h <= static_cast<int>(Alloc::kNew); h++)
    for (size_t size : kSizes) {
      auto how = static_cast<Alloc>(h);
      sweep(alloc_name(how), [&](uint64_t n) { return alloc_case(how, size, n); });
    }
}

enum class Grow { kRealloc, kReallocarray, kRallocx, kRallocxZero, kRallocxAlign, kXallocx };

const char* grow_name(Grow g) {
  static const char* const kNames[] = {"realloc", "reallocarray", "rallocx", "rallocx(ZERO)", "rallocx(ALIGN)",
                                       "xallocx"};
  return kNames[static_cast<int>(g)];
}

// A block of `from` bytes resized to `to` by `how`, with `blocker` bytes
// allocated right after it (so that a huge block cannot always grow in
// place: the moving paths run too).
bool resize_case(Grow how, size_t from, size_t to, size_t blocker, uint64_t n) {
  const char* name = grow_name(how);
  void* old = ductile_malloc(from);
  void* block = blocker ? ductile_malloc(blocker) : nullptr;
  if (old == nullptr || (blocker && block == nullptr)) {
    ADD_FAILURE() << name << ": setup";
    return false;
  }
  fill(old, from, 31);
  const size_t old_usable = ductile_malloc_usable_size(old);
  size_t keep = from < to ? from : to;
  Injection inj(n);
  errno = 0;
  void* p = nullptr;
  size_t xsize = 0;
  switch (how) {
    case Grow::kRealloc: p = ductile_realloc(old, to); break;
    case Grow::kReallocarray: p = ductile_reallocarray(old, to, 1); break;
    case Grow::kRallocx: p = ductile_rallocx(old, to, 0); break;
    case Grow::kRallocxZero: p = ductile_rallocx(old, to, MALLOCX_ZERO); break;
    case Grow::kRallocxAlign: p = ductile_rallocx(old, to, MALLOCX_ALIGN(kHugePage)); break;
    case Grow::kXallocx: xsize = ductile_xallocx(old, to, 0, 0); break;
  }
  int err = errno;
  inj.stop();
  if (how == Grow::kXallocx) {
    // In place or not at all: the block stays, at least its old size.
    EXPECT_GE(xsize, keep) << name << ": call " << n;
    EXPECT_EQ(ductile_malloc_usable_size(old), xsize) << name << ": call " << n;
    EXPECT_TRUE(check(old, keep, 31)) << name << ": call " << n;
    ductile_free(old);
  } else if (p == nullptr) {
    expect_refused(name, n, inj.injected(), err);
    EXPECT_TRUE(check(old, from, 31)) << name << ": the old block changed (call " << n << ")";
    ductile_free(old);
  } else {
    EXPECT_TRUE(check(p, keep, 31)) << name << ": contents lost (call " << n << ")";
    EXPECT_GE(ductile_malloc_usable_size(p), to) << name;
    if (how == Grow::kRallocxAlign) {
      EXPECT_EQ(addr(p) % kHugePage, 0u) << name;
    }
    if (how == Grow::kRallocxZero && to > old_usable) {
      EXPECT_TRUE(test::all_zero(p, old_usable, to)) << name << ": call " << n;
    }
    ductile_free(p);
  }
  ductile_free(block);
  return inj.injected();
}

TEST(FaultSweep, EveryResizePath) {
  struct Step {
    size_t from, to, blocker;
  };
  // small -> medium -> huge, growth into headroom, past it (with and
  // without a block behind), shrinking, and huge -> small.
  const Step steps[] = {
      {24, 5000, 0},
      {5000, 300 * 1024, 0},
      {300 * 1024, 3 * kHugePage, 0},
      {3 * kHugePage, 5 * kHugePage, 0},
      {3 * kHugePage, 12 << 20, 0},
      {3 * kHugePage, 12 << 20, 3 * kHugePage},
      {12 << 20, 3 * kHugePage, 0},
      {3 * kHugePage, 100, 0},
  };
  for (int h = 0; h <= static_cast<int>(Grow::kXallocx); h++)
    for (const Step& s : steps) {
      auto how = static_cast<Grow>(h);
      sweep(grow_name(how), [&](uint64_t n) { return resize_case(how, s.from, s.to, s.blocker, n); });
    }
}

// Frees of every kind, with decay 0 (each free purges) and with the default
// decay (nothing to purge: no call).
TEST(FaultSweep, EveryFreeFunction) {
  const uint64_t decay = core::rt().chunks.options().decay_ns;
  for (uint64_t d : {uint64_t{0}, decay}) {
    core::rt().chunks.set_decay_ns(d);
    for (size_t size : kSizes)
      for (int how = 0; how < 5; how += d == 0 ? 1 : 2) {
        sweep("free", [&](uint64_t n) {
          void* p = ductile_malloc(size);
          if (p == nullptr) return false;
          fill(p, size, 3);
          Injection inj(n);
          switch (how) {
            case 0: ductile_free(p); break;
            case 1: ductile_dallocx(p, 0); break;
            case 2: ductile_sdallocx(p, size, 0); break;
            case 3: ductile_dallocx(p, MALLOCX_TCACHE_NONE); break;
            case 4: ductile_free_sized(p, size); break;
          }
          inj.stop();
          return inj.injected();
        });
      }
  }
  core::rt().chunks.set_decay_ns(decay);
}

// Trim and the mallctls that purge, with dirty memory retained.
TEST(FaultSweep, TrimAndPurgeControls) {
  const char* const kControls[] = {"arena.0.purge", "arena.4096.purge", "arena.0.decay", "thread.tcache.flush",
                                   "ductile.trim"};
  for (int how = 0; how < 7; how++) {
    sweep("trim", [&](uint64_t n) {
      void* held[8];
      for (size_t i = 0; i < 8; i++) held[i] = ductile_malloc(i % 2 ? 40000 : 3 * kHugePage);
      for (void* p : held) ductile_free(p);
      Injection inj(n);
      if (how == 0) {
        (void)ductile_malloc_trim(0);
      } else if (how == 1) {
        (void)ductile_trim();
      } else {
        const char* ctl = kControls[how - 2];
        size_t purged = 0, len = sizeof purged;
        bool reads = std::strcmp(ctl, "ductile.trim") == 0;
        int r = ductile_mallctl(ctl, reads ? &purged : nullptr, reads ? &len : nullptr, nullptr, 0);
        EXPECT_TRUE(r == 0 || r == ENOENT) << ctl;
      }
      inj.stop();
      return inj.injected();
    });
  }
}

// A thread fills its cache (and bins) and exits: its cache goes back, with
// the n-th call failing on the way.
TEST(FaultSweep, ThreadExit) {
  sweep("thread exit", [](uint64_t n) {
    struct Arg {
      uint64_t n;
      bool injected;
    } arg{n, false};
    pthread_t t;
    auto body = [](void* a) -> void* {
      auto* arg = static_cast<Arg*>(a);
      void* held[64];
      for (size_t i = 0; i < 64; i++) held[i] = ductile_malloc(i % 4 == 3 ? 70000 : 16 + i * 8);
      for (void* p : held) ductile_free(p);
      kernel().fail_nth(arg->n);  // the exit's calls are the ones counted
      return nullptr;
    };
    EXPECT_EQ(pthread_create(&t, nullptr, body, &arg), 0);
    pthread_join(t, nullptr);
    arg.injected = kernel().fault_injected();
    kernel().fail_nth(0);
    return arg.injected;
  });
}

// fork with the n-th call failing in the child (which probes the kernel
// again): the child allocates, checks and exits.
TEST(FaultSweep, Fork) {
  sweep("fork", [](uint64_t n) {
    kernel().fail_nth(n);
    pid_t pid = fork();
    if (pid == 0) {
      int status = 0;
      for (size_t size : kSizes) {
        void* p = ductile_malloc(size);
        if (p == nullptr && !kernel().fault_injected()) status = 1;
        if (p != nullptr) {
          fill(p, size, 9);
          if (!check(p, size, 9)) status = 1;
        }
        ductile_free(p);
        (void)ductile_trim();
      }
      void* p = (kernel().fail_nth(0), ductile_malloc(100));
      if (p == nullptr) status = 1;
      _exit(status ? 1 : kernel().fault_injected() ? 2 : 0);
    }
    kernel().fail_nth(0);
    int st = 0;
    EXPECT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st)) << "call " << n;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    EXPECT_NE(code, 1) << "fork: call " << n;
    return code == 2;
  });
}

// The hardened runs are hardened (their huge blocks end at a guard).
TEST(FaultSweep, HardenedRunsAreHardened) {
  const char* mode = std::getenv("DUCTILE_FAULT_MODE");
  const bool asked = mode != nullptr && std::strncmp(mode, "hardened", 8) == 0;
  ASSERT_TRUE(core::ensure_ready());
  EXPECT_EQ(core::g_hardened, asked || kHardened);
  EXPECT_EQ(core::rt().huge.options().guard, asked || kHardened);
}

// The figures for docs/ARCHITECTURE.md, printed once at the end.
class Report : public ::testing::Environment {
 public:
  void TearDown() override {
    const char* mode = std::getenv("DUCTILE_FAULT_MODE");
    std::printf("fault sweep (%s mode): %llu cases tried, %llu faults injected\n", mode ? mode : "normal",
                static_cast<unsigned long long>(g_totals.cases), static_cast<unsigned long long>(g_totals.faults));
  }
};

}  // namespace
}  // namespace ductile

int main(int argc, char** argv) {
  // No background thread: its calls would land between a case's own. The
  // option must be set before the runtime starts, so the program runs
  // itself again, once per mode of the kernel.
  if (std::getenv("DUCTILE_CONF") == nullptr) {
    int failed = 0;
    for (const char* mode : {"normal", "strict", "limit", "hardened", "hardened_strict"}) {
      pid_t pid = fork();
      if (pid == 0) {
        const bool hardened = std::strncmp(mode, "hardened", 8) == 0;
        setenv("DUCTILE_CONF", hardened ? "background_thread:false,hardened:true" : "background_thread:false", 1);
        setenv("DUCTILE_FAULT_MODE", mode, 1);
        execv("/proc/self/exe", argv);
        std::perror("execv /proc/self/exe");
        _exit(127);
      }
      int st = 0;
      if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
    }
    return failed;
  }
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new ductile::Report);
  return RUN_ALL_TESTS();
}
