// SPDX-License-Identifier: BSD-2-Clause
// Thread caches: their life cycle and the flushes that give blocks back
// (core/cache.h).
#include "core/cache.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <new>

#include "core/depot.h"
#include "core/fallback_heap.h"
#include "core/growth.h"
#include "core/prof.h"

namespace ductile::core {

using chunk::Extent;
using chunk::ExtentKind;
using small::ThreadCache;

pthread_key_t g_cache_key;
Mutex g_caches_lock;
ThreadCache* g_live_caches = nullptr;
ThreadCache* g_free_caches = nullptr;
ThreadCache* g_parked = nullptr;  // g_caches_lock; linked by park_next
size_t g_nparked = 0;             // g_caches_lock (read without it by parked_caches)

ThreadCache* create_cache() {
  // hardened:true without --enable-hardened: no caches, so that every call
  // reaches the checks without a test on the inline paths.
  if (t_state != kNoCache || t_cache_off || !rt().opts.tcache || (g_hardened && !kHardened) || g_fork_heap)
    return nullptr;
  t_state = kMakingCache;
  ThreadCache* tc;
  bool adopted = false;
  {
    // A parked cache first: the exited thread's blocks, warm, and the
    // record on the live list already.
    LockGuard g(g_caches_lock);
    if ((tc = g_parked) != nullptr) {
      g_parked = tc->park_next;
      __atomic_store_n(&g_nparked, g_nparked - 1, __ATOMIC_RELAXED);
      adopted = true;
    } else if ((tc = g_free_caches) != nullptr) {
      g_free_caches = tc->next;
    }
  }
  if (tc == nullptr) {
    void* mem = rt().chunks.meta().alloc(sizeof(ThreadCache), kPage);
    if (mem == nullptr) {
      t_state = kNoCache;
      return nullptr;
    }
    // Default-initialized: the slots stay as MetaAlloc gave them, zeroes
    // (a slot never written reads as null), their pages untouched until
    // used; value-initializing wrote 22 KiB at a thread's first call.
    tc = new (mem) ThreadCache;
    growth::add_record(tc);
  }
  if (adopted) {
    tc->reset_counters();
  } else {
    tc->init();
  }
  {
    static std::atomic<uint32_t> next_set{0};
    tc->bin_set = next_set.fetch_add(1, std::memory_order_relaxed) % static_cast<uint32_t>(rt().nbinsets);
  }
  if (!adopted) {
    LockGuard g(g_caches_lock);
    tc->prev = nullptr;
    tc->next = g_live_caches;
    if (g_live_caches) {
      g_live_caches->prev = tc;
      depot_enable();  // a second thread with a cache
    }
    // Made once the depot is on (a second cache): deeper medium bins, set
    // before the collection can scan it.
    if (depot_holds(small::kNumSmall)) tc->deepen_medium();
    g_live_caches = tc;
  }
  if (kProf) tc->prof_at = prof::initial_at();
  // Registers the destructor that gives the cache back at thread exit. It
  // may allocate (see kMakingCache), so the cache is not this thread's yet.
  if (pthread_setspecific(g_cache_key, tc) != 0) {
    // No destructor would give it back: this thread goes uncached (the
    // blocks of an adopted cache go back first).
    retire_cache(tc);
    t_state = kNoCache;
    return nullptr;
  }
  t_cache = tc;
  t_state = kHasCache;
  return tc;
}

// Returns the first n blocks of a cache bin (its slots: items) to where
// they came from.
void flush_objects(size_t cls, void** items, size_t n) {
  if (small::is_small_class(cls)) {
    small::Bin::flush_to_owners(rt().chunks, items, n);
    return;
  }
  if (kHardened) {
    for (size_t i = 0; i < n; i++) {
      const Extent* e = static_cast<Extent*>(items[2 * i + 1]);  // beside its address (thread_cache.h)
      if (e->state != chunk::ExtentState::kActive || e->kind != ExtentKind::kMedium)
        fatal_pointer("free(): double free detected", ptr(e->base));
    }
  }
  // The depot first, as they lie (still marked cached and freed); the rest
  // to the chunk layer.
  const size_t kept = depot_holds(cls) ? depot_put(cls, items, n) : 0;
  make_background_before((n - kept) * small::class_size(cls));
  for (size_t i = kept; i < n; i++) medium_to_chunks(static_cast<Extent*>(items[2 * i + 1]));
}

void medium_to_chunks(Extent* e) noexcept {
  if (g_hardened) small::take_marked(ptr(e->base), small::class_size(e->size_class));
  medium_take(e);
  rt().chunks.free(e);  // dirty, for the next user or for decay
}

// Gives back the oldest n blocks of a cache bin.
static void flush_oldest(small::CacheBin& b, size_t cls, size_t n) {
  flush_objects(cls, b.items, n);
  const size_t slots = small::detail::slots_per_block(cls);
  const size_t left = b.count() - n;
  std::memmove(b.items, b.items + n * slots, left * slots * sizeof(void*));
  b.set_count(left);
}

// A full cache bin gives back its older half.
void flush_half(ThreadCache* tc, size_t cls) {
  small::CacheBin& b = tc->bins[cls];
  flush_oldest(b, cls, small::half_bin(b));
}

// ---- a small bin's depth (small::kDepthGrowth) --------------------------
// A batch of n blocks of one size, allocated and then freed, with n past a
// bin's depth: every batch empties the bin (a fill from the bin's slabs,
// under their lock) and fills it up again (a flush), each of them a
// half-bin of blocks put one by one into their slabs' bitmaps. A bin that
// turns from a fill to a flush, or back, within one and a half bins' worth
// of the thread's calls is such a batch (a batch turns within that after
// its last fill: half a bin handed out, then a bin's worth freed) -- a
// random mix of allocations and frees needs many times that to cross the
// half-bin between -- and doubles its
// depth, so that a batch of up to kDepthGrowth times its base depth lies in
// the cache whole. The pace is measured in the bytes of the thread's calls
// (allocated + deallocated), all classes together: other classes' calls in
// between only make the bin seem slower. One whose fills and flushes come
// kSlowerSpans bins' worth apart goes back to its base depth.
namespace {

constexpr uint64_t kSlowerSpans = 8;

// Bin cls back to its base depth: its blocks past half of it go back.
void base_depth(ThreadCache* tc, size_t cls) {
  small::CacheBin& b = tc->bins[cls];
  const uint32_t cap = small::cache_cap(cls);
  if (b.count() > cap / 2) flush_oldest(b, cls, b.count() - cap / 2);
  tc->deep_bytes -= size_t{b.limit - cap} * small::class_size(cls);
  b.set_limit(cap);
}

void deepen(ThreadCache* tc, size_t cls) {
  small::CacheBin& b = tc->bins[cls];
  const size_t more = size_t{b.limit} * small::class_size(cls);
  if (tc->deep_bytes + more > small::kDepthBudget) {
    // The others' growth goes back first: the latest bouncing class gets it.
    for (size_t c = 0; c < small::kNumSmall; c++)
      if (c != cls && tc->bins[c].limit > small::cache_cap(c)) base_depth(tc, c);
    if (tc->deep_bytes + more > small::kDepthBudget) return;
  }
  if (tc->deep == nullptr) {
    void* mem = rt().chunks.meta().alloc(small::kDeepSlots * sizeof(void*), kPage);
    if (mem == nullptr) return;  // no growth, then
    tc->deep = static_cast<void**>(mem);
  }
  void** slots = tc->deep + small::detail::deep_offset(cls);
  if (b.items != slots) {
    std::memcpy(slots, b.items, b.count() * sizeof(void*));
    b.move_to(slots);
  }
  tc->deep_bytes += more;
  b.set_limit(b.limit * 2);
}

}  // namespace

void adapt_depth(ThreadCache* tc, size_t cls, bool fill) noexcept {
  if (!kStats) return;  // no count of the thread's calls to pace it by
  small::CacheBin& b = tc->bins[cls];
  const uint64_t now = tc->allocated + tc->deallocated + 1;  // depth_at's 0: no fill or flush yet
  const uint64_t was = tc->depth_at[cls];
  const uint64_t bit = uint64_t{1} << cls;
  const bool turned = was != 0 && ((tc->depth_filled & bit) != 0) != fill;
  tc->depth_at[cls] = now;
  tc->depth_filled = fill ? tc->depth_filled | bit : tc->depth_filled & ~bit;
  const uint64_t span = uint64_t{b.limit} * small::class_size(cls);
  const uint32_t cap = small::cache_cap(cls);
  if (turned && now - was <= span + span / 2) {
    if (b.limit < cap * small::kDepthGrowth) deepen(tc, cls);
  } else if (b.limit > cap && now - was > kSlowerSpans * span) {
    base_depth(tc, cls);
  }
}

void flush_all(ThreadCache* tc) {
  for (size_t c = 0; c < small::kNumClasses; c++) {
    small::CacheBin& b = tc->bins[c];
    if (!b.empty()) flush_objects(c, b.items, b.count());
    b.set_count(0);
  }
}

void retire_cache(ThreadCache* tc) {
  flush_all(tc);
  LockGuard g(g_caches_lock);
  unlink_cache(tc);
}

// Moves a cache from the live list to the free pool (g_caches_lock held).
void unlink_cache(ThreadCache* tc) {
  if (tc->prev) tc->prev->next = tc->next;
  else g_live_caches = tc->next;
  if (tc->next) tc->next->prev = tc->prev;
  tc->prev = nullptr;
  tc->next = g_free_caches;
  g_free_caches = tc;
}

void thread_exit(void* arg) noexcept {
  if (g_fork_heap) return;  // its cache is the parent's, half used: left as it is
  const InCall in_call;
  auto* tc = static_cast<ThreadCache*>(arg);
  t_cache = no_cache();
  t_state = kExiting;  // frees from later destructors go straight to the bins
  // Parked whole, blocks and all, for the next thread that makes a cache
  // (in a program that runs one short-lived thread after another, it wants
  // the same blocks at once), while fewer than kMaxParked are: the record
  // stays on the live list, where the idle caches' collection ages its
  // medium blocks, and a background step that finds it parked a second
  // time retires it (retire_parked), as trim does at once.
  {
    LockGuard g(g_caches_lock);
    if (g_nparked < kMaxParked) {
      tc->park_seen = false;
      tc->park_next = g_parked;
      g_parked = tc;
      __atomic_store_n(&g_nparked, g_nparked + 1, __ATOMIC_RELAXED);
      tc = nullptr;
    }
  }
  // (A background thread asleep is not woken for it: at most kMaxParked
  // caches wait for the next thread, its next step, trim or exit. Waking
  // it at each exit made it step at each exit, and retire what the next
  // thread was about to adopt.)
  if (tc == nullptr) return;
  // Its cached blocks go back dirty, and the slabs it emptied stay in their
  // bins: a thread's exit is no sign that the process is done with the
  // memory (the next thread usually wants it at once), so decay returns it
  // on its usual schedule, and the doorbell wakes the background thread when
  // what is retained reaches its mark. (Purging here made each of a stream
  // of short-lived threads fault in again what the one before gave back.)
  retire_cache(tc);
  wake_background_if_rung();
}

size_t parked_caches() noexcept { return __atomic_load_n(&g_nparked, __ATOMIC_RELAXED); }

bool retire_parked(bool all) noexcept {
  ThreadCache* out[kMaxParked];
  size_t n = 0;
  {
    LockGuard g(g_caches_lock);
    for (ThreadCache** at = &g_parked; *at != nullptr;) {
      ThreadCache* tc = *at;
      if (all || tc->park_seen) {
        *at = tc->park_next;
        out[n++] = tc;
      } else {
        tc->park_seen = true;
        at = &tc->park_next;
      }
    }
    __atomic_store_n(&g_nparked, g_nparked - n, __ATOMIC_RELAXED);
  }
  for (size_t i = 0; i < n; i++) retire_cache(out[i]);
  return parked_caches() != 0;
}

void forget_parked() noexcept {
  g_parked = nullptr;
  g_nparked = 0;
}

void medium_taken_slow(Extent* e, uint8_t was) noexcept {
  // A purge under way: it ends soon (one madvise or process_madvise).
  for (int spins = 0; __atomic_load_n(&e->purging, __ATOMIC_ACQUIRE) != 0; spins++)
    if (spins > 64) sched_yield();
  // Its pages were purged while it lay in the cache, and its owner is busy
  // again: its doorbell rings, so that the background thread watches the
  // caches again (it sleeps once every cached block is purged).
  if (was == kCachedPurged) rt().chunks.note_retained(e->size);
}

bool next_fill(ThreadCache* tc) noexcept {
  const size_t rate = rt().opts.freed_fill;
  const bool seeded = tc->fill_rng != 0;
  uint32_t x = seeded ? tc->fill_rng : static_cast<uint32_t>(small::freed_mark(tc)) | 1;  // keyed, not 0
  x ^= x << 13;  // xorshift32
  x ^= x >> 17;
  x ^= x << 5;
  tc->fill_rng = x;
  if (rate == 0) {
    tc->fill_countdown = UINT32_MAX;
    return false;
  }
  // 1 to 2 * rate - 1 frees apart: rate on average (every one at 1).
  tc->fill_countdown = static_cast<uint32_t>(1 + x % (2 * rate - 1));
  return seeded || rate == 1;
}

void decay_event(small::ThreadCache* tc) noexcept {
  const InCall in_call;
  static_assert(small::ThreadCache::kDecayEvent == small::Decay::kEvent);
  tc->decay_countdown = rt().decay.look();
}

}  // namespace ductile::core
