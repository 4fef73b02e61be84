// SPDX-License-Identifier: BSD-2-Clause
// The idle caches' collection and the background thread's step
// (core/collect.h).
#include "core/collect.h"

#include "base/fork_gate.h"
#include "core/cache.h"
#include "core/depot.h"

namespace ductile::core {

using chunk::Extent;
using small::ThreadCache;

// Memory awaiting decay that starts (or wakes) the background thread: two
// huge pages. A short-lived program that frees less never gets a thread.
constexpr size_t kBackgroundStart = 2 * kHugePage;

void background_arm() noexcept { rt().chunks.arm(kBackgroundStart); }

// ---- idle caches' collection ---------------------------------------------
// Medium blocks wait in thread caches for the next malloc of their class,
// one or two of each class per thread, and a thread that goes quiet kept
// them resident for good (64 threads that allocated, freed and slept held
// 542 MiB). Each decay step of the background thread also ages every
// medium block that lies in a cache one step (a compare-and-swap on its
// extent's mark, which the owner's hand-out overrides) and purges, where it
// lies, a block kCachedPurgeAt steps old -- about one decay time untouched,
// the steps coming every quarter of it -- or, while the cached blocks'
// resident bytes pass kCachedResidentBound for the process, any block aged
// a step. The block stays in its cache, clean; its owner hands it out as
// before and faults its pages in again as it writes them (and wakes the
// background thread to watch the block again: medium_taken_slow).
//
// A purge under the owner's feet needs a handshake, and the owner's side is
// on the inline malloc: it clears the mark, then reads `purging` with only
// a compiler barrier between (medium_take). The collector sets `purging`,
// then fences every thread of the process (membarrier: the owner's clear
// is then visible, or its read will see `purging`), then purges only if
// the mark still says the block lies in a cache; an owner that saw
// `purging` waits for the purge to end. Without membarrier (Linux before
// 4.14) blocks are aged but never purged.
//
// The scan reads other threads' cache bins without their owners' knowledge:
// a count or slot may be stale. Every block found is checked against its
// extent's mark, which only ever says "cached" of a medium block that lies
// in some cache, so a stale slot costs a wasted look, never a wrong purge.
constexpr size_t kCachedResidentBound = size_t{64} << 20;
constexpr size_t kCollectBatch = 128;  // slots per batch: its arrays (5 KiB) live on the background thread's 64 KiB stack
Mutex g_collect_lock;                  // one collection at a time

namespace {

size_t g_collect_next = 0;  // where the last step's scan stopped (g_collect_lock)

// Takes up to n cached medium blocks into out, from the cache list (its
// lock held), resuming after the ones the last step took.
__attribute__((no_sanitize("thread"))) size_t scan_cached_medium(void** out, size_t n) {
  LockGuard g(g_caches_lock);
  size_t seen = 0, got = 0;
  for (ThreadCache* tc = g_live_caches; tc != nullptr && got < n; tc = tc->next)
    for (size_t c = small::kNumSmall; c < small::kNumClasses && got < n; c++) {
      const small::CacheBin& b = tc->bins[c];
      const uint32_t count = b.count_to(__atomic_load_n(&b.top, __ATOMIC_RELAXED));
      for (uint32_t i = 0; i < count && i < b.limit && got < n; i++, seen++)
        if (seen >= g_collect_next) out[got++] = __atomic_load_n(&small::medium_block_extent(b, i), __ATOMIC_RELAXED);
    }
  g_collect_next = got == n ? g_collect_next + got : 0;
  return got;
}

// One batch of a step (g_collect_lock held): the blocks of up to
// kCollectBatch slots from where the last batch stopped. `resident`: the
// cached blocks' bytes not purged, counted so far in this step. Returns
// false once the scan has been round every cache.
__attribute__((no_sanitize("thread"))) bool collect_batch(size_t& resident, bool& pending) noexcept {
  // Inside the fork gate: a child forked between setting a block's
  // `purging` and clearing it would wait for it for good.
  const InFlight gate;
  void* found[kCollectBatch];
  const size_t n = scan_cached_medium(found, kCollectBatch);
  Extent* purge[kCollectBatch];
  uint8_t age[kCollectBatch];  // each one's mark when chosen
  size_t np = 0;
  for (size_t i = 0; i < n; i++) {
    // An extent record (they are never unmapped); a stale slot's may hold
    // anything now, and its mark says whether it is a cached medium block.
    // A slot never written yet reads as null.
    Extent* e = static_cast<Extent*>(found[i]);
    if (e == nullptr) continue;
    const uint8_t s = __atomic_load_n(&e->cached, __ATOMIC_RELAXED);
    if (s == 0 || s == kCachedPurged) continue;
    resident += e->size;
    const bool over = resident > kCachedResidentBound;
    if (s >= kCachedPurgeAt || (over && s > kCachedFresh)) {
      __atomic_store_n(&e->purging, 1, __ATOMIC_RELAXED);
      age[np] = s;
      purge[np++] = e;
    } else {
      uint8_t expect = s;
      (void)__atomic_compare_exchange_n(&e->cached, &expect, static_cast<uint8_t>(s + 1), false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
      pending = true;
    }
  }
  if (np != 0) {
    const bool fenced = rt().os.fence_all_threads();
    os::Range ranges[kCollectBatch];
    bool kept[kCollectBatch];
    size_t nr = 0;
    for (size_t i = 0; i < np; i++) {
      // Still lying there untouched (its owner would have cleared the mark,
      // and maybe put it back fresh): purged; else left alone.
      kept[i] = fenced && __atomic_load_n(&purge[i]->cached, __ATOMIC_RELAXED) == age[i];
      // --enable-hardened: the first page keeps the freed mark that the
      // hand-out checks (small::take_marked).
      const size_t keep = kHardened ? kPage : 0;
      if (kept[i] && purge[i]->size > keep) ranges[nr++] = {ptr(purge[i]->base + keep), purge[i]->size - keep};
    }
    if (nr != 0) (void)rt().os.purge(ranges, nr, os::Advice::kDontNeed);
    for (size_t i = 0; i < np; i++) {
      uint8_t expect = age[i];
      if (kept[i])
        (void)__atomic_compare_exchange_n(&purge[i]->cached, &expect, kCachedPurged, false, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED);
    }
    for (size_t i = 0; i < np; i++) __atomic_store_n(&purge[i]->purging, 0, __ATOMIC_RELEASE);
    if (!fenced) pending = false;  // nothing to purge with: aged blocks stay as they are
  }
  return n == kCollectBatch;
}

// One step, round every cache; true while a cached medium block is not
// purged (the background thread then keeps stepping).
bool collect_cached_medium() noexcept {
  if (!g_collect_lock.try_lock()) return true;
  size_t resident = 0;
  bool pending = false;
  while (collect_batch(resident, pending)) {
  }
  g_collect_lock.unlock();
  return pending;
}

}  // namespace

// One decay step of every layer that retains memory for the decay time,
// and of the thread caches' medium blocks. True while something still
// awaits it.
bool background_step() noexcept {
  bool pending = rt().decay.step().pending;
  if (collect_cached_medium()) pending = true;
  if (depot_step(false)) pending = true;
  if (retire_parked(false)) pending = true;
  return pending;
}

}  // namespace ductile::core
