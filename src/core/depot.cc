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

// The classes with a depot: up to 64 KiB, where the chunk layer's cost per
// block is large against writing the block.
constexpr size_t kDepotMaxSize = 64 * 1024;
// Bytes a class's depot holds at most, as blocks: from 4 to kDepotSlots.
constexpr size_t kDepotBytes = 512 * 1024;
constexpr size_t kDepotSlots = 32;

struct Depot {
  Mutex lock;
  uint32_t count = 0;
  uint32_t cap = 0;
  bool used = false;  // taken from or given to since the last step
  Extent* blocks[kDepotSlots] = {};
};

constexpr size_t depot_classes() {
  size_t n = 0;
  while (small::kNumSmall + n < small::kNumClasses && small::kClasses.size[small::kNumSmall + n] <= kDepotMaxSize) n++;
  return n;
}
constexpr size_t kDepotClasses = depot_classes();

// One per class with a depot, from the first medium class on.
Depot g_depots[kDepotClasses];
std::atomic<size_t> g_depot_bytes{0};

size_t depot_cap(size_t cls) noexcept {
  const size_t n = kDepotBytes / small::class_size(cls);
  return n < 4 ? 4 : n > kDepotSlots ? kDepotSlots : n;
}

// Gives blocks back to the chunk layer, out of any depot's lock: as a full
// cache's flush gives back a medium block (core/cache.cc: flush_objects).
void give_back(Extent** blocks, size_t n) noexcept {
  for (size_t i = 0; i < n; i++) {
    if (kHardened) small::take_marked(ptr(blocks[i]->base));
    medium_take(blocks[i]);
    rt().chunks.free(blocks[i]);  // dirty, for the next user or for decay
  }
}

}  // namespace

bool depot_holds(size_t cls) noexcept { return cls >= small::kNumSmall && cls < small::kNumSmall + kDepotClasses; }

size_t depot_put(size_t cls, void** items, size_t n) noexcept {
  Depot& d = g_depots[cls - small::kNumSmall];
  LockGuard g(d.lock);
  if (d.cap == 0) d.cap = static_cast<uint32_t>(depot_cap(cls));
  size_t took = 0;
  for (; took < n && d.count < d.cap; took++)
    d.blocks[d.count++] = static_cast<Extent*>(small::medium_block_extent(small::CacheBin{items, 0, 0}, took));
  if (took != 0) {
    d.used = true;
    g_depot_bytes.fetch_add(took * small::class_size(cls), std::memory_order_relaxed);
  }
  return took;
}

size_t depot_take(size_t cls, void** items, size_t n) noexcept {
  Depot& d = g_depots[cls - small::kNumSmall];
  if (__atomic_load_n(&d.count, __ATOMIC_RELAXED) == 0) return 0;  // a glance first: most misses find none
  LockGuard g(d.lock);
  size_t got = 0;
  const small::CacheBin b{items, 0, 0};
  for (; got < n && d.count != 0; got++) {
    Extent* e = d.blocks[--d.count];
    small::medium_block(b, got) = ptr(e->base);
    small::medium_block_extent(b, got) = e;
  }
  if (got != 0) {
    d.used = true;
    g_depot_bytes.fetch_sub(got * small::class_size(cls), std::memory_order_relaxed);
  }
  return got;
}

bool depot_step(bool all) noexcept {
  bool holds = false;
  for (size_t cls = small::kNumSmall; depot_holds(cls); cls++) {
    Depot& d = g_depots[cls - small::kNumSmall];
    if (__atomic_load_n(&d.count, __ATOMIC_RELAXED) == 0) continue;
    Extent* out[kDepotSlots];
    size_t n = 0;
    {
      LockGuard g(d.lock);
      if (all || !d.used) {
        n = d.count;
        for (size_t i = 0; i < n; i++) out[i] = d.blocks[i];
        d.count = 0;
        g_depot_bytes.fetch_sub(n * small::class_size(cls), std::memory_order_relaxed);
      }
      d.used = false;
      if (d.count != 0) holds = true;
    }
    give_back(out, n);
  }
  return holds;
}

size_t depot_bytes() noexcept { return g_depot_bytes.load(std::memory_order_relaxed); }

void depot_prefork() noexcept {
  for (Depot& d : g_depots) d.lock.lock();
}

void depot_postfork_parent() noexcept {
  for (Depot& d : g_depots) d.lock.unlock();
}

void depot_postfork_child() noexcept {
  for (Depot& d : g_depots) d.lock.reinit_after_fork();
}

}  // namespace ductile::core
