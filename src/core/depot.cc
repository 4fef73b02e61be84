// SPDX-License-Identifier: BSD-2-Clause
// The medium depot (core/depot.h): per class, a locked stack of medium
// blocks between the thread caches and the chunk layer.
#include "core/depot.h"

#include <atomic>

#include "base/lock.h"
#include "core/cache.h"
#include "core/state.h"

namespace ductile::core {

using chunk::Extent;

namespace {

// The classes whose depot the caches use: up to 64 KiB, where the chunk
// layer's cost per block is large against writing the block.
constexpr size_t kDepotMaxSize = 64 * 1024;
// Hardened mode's threads without a cache keep blocks of the classes up to
// here (depot_holds_uncached): two a class before the caches use the
// depots, at most about 3 MiB in all.
constexpr size_t kDepotMaxSizeUncached = 256 * 1024;
// A depot's period, in puts and takes. At its end the blocks that lay at
// its bottom throughout (below its low-water mark) go back to the chunk
// layer: a class whose blocks are freed but seldom allocated again -- the
// old blocks of buffers grown by realloc -- keeps none for long.
constexpr uint32_t kDepotPeriod = 16;
constexpr uint32_t kDepotUncachedSlots = 2;

struct Depot {
  uint32_t count = 0;
  uint32_t low = 0;  // the fewest blocks held since the period began
  uint32_t ops = 0;  // puts and takes since then
  bool used = false;  // taken from or given to since the last step
  Extent* blocks[kDepotSlots] = {};  // the oldest first
};

constexpr size_t depot_classes(size_t max_size) {
  size_t n = 0;
  while (small::kNumSmall + n < small::kNumClasses && small::kClasses.size[small::kNumSmall + n] <= max_size) n++;
  return n;
}
constexpr size_t kDepotClasses = depot_classes(kDepotMaxSizeUncached);  // depots made
constexpr size_t kCacheDepotClasses = depot_classes(kDepotMaxSize);     // what caches use

// One per class with a depot, from the first medium class on: zeroes, with
// the other large arrays (DUCTILE_LARGE_STATIC), and their locks apart, as a
// lock's initial bytes are not zeroes. Together they were 5 KiB of
// initialised data, and a page more that loading the library wrote.
DUCTILE_LARGE_STATIC Depot g_depots[kDepotClasses];
// The locks of the depots the caches use.
Mutex g_depot_locks[kCacheDepotClasses];
// The depots past the caches' classes (hardened mode's threads without a
// cache use them, rarely at once) share one lock: fork's prepare handler
// holds every depot's lock with every bin's, and each one more held lock
// counts (ThreadSanitizer's deadlock detector stops at 64 held at once).
Mutex g_uncached_lock;

Mutex& lock_of(Depot& d) noexcept {
  const size_t i = static_cast<size_t>(&d - g_depots);
  return i < kCacheDepotClasses ? g_depot_locks[i] : g_uncached_lock;
}
std::atomic<size_t> g_depot_bytes{0};

std::atomic<bool> g_depot_on{false};

// Blocks a depot of class cls holds at most. Before the caches use the
// depots (depot_enable), only hardened mode's threads without a cache put
// blocks there, so that the hand-out checks their marks: two are enough for
// that, and keep what waits there small.
uint32_t depot_cap(size_t cls) noexcept {
  if (!g_depot_on.load(std::memory_order_relaxed)) return kDepotUncachedSlots;
  const size_t n = kDepotBytes / small::class_size(cls);
  return static_cast<uint32_t>(n < 4 ? 4 : n > kDepotSlots ? kDepotSlots : n);
}

// Sets the count (lock held), which takes glance at without the lock.
void set_count(Depot& d, uint32_t count) noexcept { __atomic_store_n(&d.count, count, __ATOMIC_RELAXED); }

// Moves the oldest n blocks of d (lock held) to out.
void take_oldest(Depot& d, size_t cls, Extent** out, uint32_t n) noexcept {
  for (uint32_t i = 0; i < n; i++) out[i] = d.blocks[i];
  for (uint32_t i = n; i < d.count; i++) d.blocks[i - n] = d.blocks[i];
  set_count(d, d.count - n);
  g_depot_bytes.fetch_sub(n * small::class_size(cls), std::memory_order_relaxed);
}

// One more put or take (lock held): at the end of a period, the blocks
// below the low-water mark go to out; returns how many.
uint32_t tick(Depot& d, size_t cls, Extent** out) noexcept {
  if (d.count < d.low) d.low = d.count;
  if (++d.ops < kDepotPeriod) return 0;
  const uint32_t n = d.low;
  take_oldest(d, cls, out, n);
  d.ops = 0;
  d.low = d.count;
  return n;
}

// After a put or take (lock held) that left `count` blocks and moved
// `moved` (in, or out): the count, the bytes, and the period's tick, whose
// blocks to give back go to out; returns how many.
uint32_t settle(Depot& d, size_t cls, uint32_t count, size_t moved, bool in, Extent** out) noexcept {
  set_count(d, count);
  if (moved != 0) {
    d.used = true;
    if (in) g_depot_bytes.fetch_add(moved * small::class_size(cls), std::memory_order_relaxed);
    else g_depot_bytes.fetch_sub(moved * small::class_size(cls), std::memory_order_relaxed);
  }
  return tick(d, cls, out);
}

// Gives n blocks of class cls back to the chunk layer, out of any depot's
// lock, as a full cache's flush does (core/cache.cc: flush_objects).
void give_back(size_t cls, Extent** blocks, size_t n) noexcept {
  if (n == 0) return;
  make_background_before(n * small::class_size(cls));
  for (size_t i = 0; i < n; i++) medium_to_chunks(blocks[i]);
}

}  // namespace

void depot_enable(bool on) noexcept { g_depot_on.store(on, std::memory_order_relaxed); }

bool depot_holds(size_t cls) noexcept {
  return cls >= small::kNumSmall && cls < small::kNumSmall + kCacheDepotClasses &&
         g_depot_on.load(std::memory_order_relaxed);
}

bool depot_holds_uncached(size_t cls) noexcept {
  return cls >= small::kNumSmall && cls < small::kNumSmall + kDepotClasses;
}

size_t depot_put(size_t cls, void** items, size_t n) noexcept {
  Depot& d = g_depots[cls - small::kNumSmall];
  const small::CacheBin b{items, items, items, 0, 1};
  Extent* out[kDepotSlots];
  uint32_t nout;
  size_t took = 0;
  {
    LockGuard g(lock_of(d));
    uint32_t count = d.count;
    for (const uint32_t cap = depot_cap(cls); took < n && count < cap; took++)
      d.blocks[count++] = static_cast<Extent*>(small::medium_block_extent(b, took));
    nout = settle(d, cls, count, took, true, out);
  }
  give_back(cls, out, nout);
  return took;
}

size_t depot_take(size_t cls, void** items, size_t n) noexcept {
  Depot& d = g_depots[cls - small::kNumSmall];
  if (__atomic_load_n(&d.count, __ATOMIC_RELAXED) == 0) return 0;  // a glance first
  const small::CacheBin b{items, items, items, 0, 1};
  Extent* out[kDepotSlots];
  uint32_t nout;
  size_t got = 0;
  {
    LockGuard g(lock_of(d));
    uint32_t count = d.count;
    for (; got < n && count != 0; got++) {
      Extent* e = d.blocks[--count];  // the newest first
      small::medium_block(b, got) = ptr(e->base);
      small::medium_block_extent(b, got) = e;
    }
    nout = settle(d, cls, count, got, false, out);
  }
  give_back(cls, out, nout);
  return got;
}

bool depot_step(bool all) noexcept {
  bool holds = false;
  for (size_t cls = small::kNumSmall; cls < small::kNumSmall + kDepotClasses; cls++) {
    Depot& d = g_depots[cls - small::kNumSmall];
    if (__atomic_load_n(&d.count, __ATOMIC_RELAXED) == 0) continue;
    Extent* out[kDepotSlots];
    uint32_t n = 0;
    {
      LockGuard g(lock_of(d));
      if (all || !d.used) {
        n = d.count;
        take_oldest(d, cls, out, n);
        d.low = 0;
        d.ops = 0;
      }
      d.used = false;
      if (d.count != 0) holds = true;
    }
    give_back(cls, out, n);
  }
  return holds;
}

size_t depot_bytes() noexcept { return g_depot_bytes.load(std::memory_order_relaxed); }

void depot_prefork() noexcept {
  for (size_t i = 0; i < kCacheDepotClasses; i++) g_depot_locks[i].lock();
  g_uncached_lock.lock();
}

void depot_postfork_parent() noexcept {
  g_uncached_lock.unlock();
  for (size_t i = 0; i < kCacheDepotClasses; i++) g_depot_locks[i].unlock();
}

void depot_postfork_child() noexcept {
  for (size_t i = 0; i < kCacheDepotClasses; i++) g_depot_locks[i].reinit_after_fork();
  g_uncached_lock.reinit_after_fork();
}

}  // namespace ductile::core
