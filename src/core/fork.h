// SPDX-License-Identifier: BSD-2-Clause
#include "core/runtime.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/auxv.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "base/fork_gate.h"
#include "core/prof.h"
#include "core/stats.h"
#include "core/stdio_fork.h"
#include "os/kernel.h"

namespace ductile::core {

alignas(Runtime) unsigned char g_runtime[sizeof(Runtime)];
std::atomic<bool> g_ready{false};
size_t g_huge_threshold = 0;
bool g_hardened = false;
alignas(small::ThreadCache) unsigned char g_no_cache[sizeof(small::ThreadCache)];
__thread small::ThreadCache* t_cache __attribute__((tls_model("initial-exec"))) =
    reinterpret_cast<small::ThreadCache*>(g_no_cache);

namespace {

using chunk::Extent;
using chunk::ExtentKind;
using small::ThreadCache;

// ---- bootstrap ---------------------------------------------------------
// Memory for calls that reach us while this very thread is creating the
// runtime (a libc function that allocates on first use, an interposed
// getenv). Never reused, so it reads as zero; a 16-byte header before each
// block holds its size for realloc and malloc_usable_size. Only the thread
// that holds the init lock gets here, but the offset is claimed atomically
// all the same.
constexpr size_t kBootstrapBytes = 64 * 1024;
alignas(16) unsigned char g_bootstrap[kBootstrapBytes];
std::atomic<size_t> g_bootstrap_used{0};

bool is_bootstrap(const void* p) {
  return addr(p) >= addr(g_bootstrap) && addr(p) < addr(g_bootstrap) + kBootstrapBytes;
}

// `align`: 0 or a power of two. Sizes and alignments are bounded by the
// buffer before any arithmetic, so nothing wraps (size + 16 did, near SIZE_MAX).
void* bootstrap_alloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  if (size > kBootstrapBytes || align > kBootstrapBytes) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t off = g_bootstrap_used.load(std::memory_order_relaxed);
  size_t start, end;
  do {
    start = align_up(addr(g_bootstrap) + off + 16, align) - addr(g_bootstrap);
    end = start + align_up(size, 16);
    if (end > kBootstrapBytes) {
      errno = ENOMEM;
      return nullptr;
    }
  } while (!g_bootstrap_used.compare_exchange_weak(off, end, std::memory_order_relaxed));
  unsigned char* p = g_bootstrap + start;
  std::memcpy(p - 16, &size, sizeof size);
  return p;
}

size_t bootstrap_size(const void* p) {
  size_t s;
  std::memcpy(&s, static_cast<const unsigned char*>(p) - 16, sizeof s);
  return s;
}

// ---- thread state ------------------------------------------------------
// kMakingCache: create_cache is under way on this thread. What it calls may
// allocate and free (the C library's pthread_setspecific callocs a
// second-level table for a key past the first 32): those calls go uncached
// instead of making a cache again.
enum ThreadState : uint8_t { kNoCache, kMakingCache, kHasCache, kExiting };
__thread uint8_t t_state __attribute__((tls_model("initial-exec"))) = kNoCache;
__thread bool t_initialising __attribute__((tls_model("initial-exec"))) = false;
// This thread has made a free without a cache (see cache_for_free).
__thread bool t_freed_uncached __attribute__((tls_model("initial-exec"))) = false;
// thread.tcache.enabled was set false: this thread makes no cache.
__thread bool t_cache_off __attribute__((tls_model("initial-exec"))) = false;

// Calls into the allocator under way on this thread (InCall): a fork from
// a signal handler that interrupted one of them must not trust the heap in
// the child (see prefork), even where the call held no lock at that moment
// (a cache bin half flushed, its count not yet lowered).
__thread unsigned t_calls __attribute__((tls_model("initial-exec"))) = 0;
class InCall {
 public:
  InCall() noexcept {
    t_calls++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  }
  ~InCall() {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_calls--;
  }
  InCall(const InCall&) = delete;
  InCall& operator=(const InCall&) = delete;
};

// ---- the heap of a child forked mid-call -------------------------------
// The child of such a fork allocates from a heap of its own: the heap it
// inherited has an operation half done (the interrupted one), which the
// child would find. Blocks are carved in turn from fresh mappings and never
// reused, each after a 16-byte header holding its size; every free is
// dropped (blocks from before the fork too), realloc copies. Such a child
// execs or exits soon; it gets no thread cache.
bool g_fork_heap = false;  // set in such a child only
struct ForkHeapChunk {
  uintptr_t base = 0, end = 0;
};
constexpr size_t kForkHeapChunks = 48;  // doubling sizes: far more than any address space
ForkHeapChunk g_fork_chunks[kForkHeapChunks];
size_t g_fork_nchunks = 0;
uintptr_t g_fork_next = 0;  // in the newest chunk
Mutex g_fork_heap_lock;     // for the threads such a child may start

void* fork_heap_alloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  if (size > static_cast<size_t>(PTRDIFF_MAX) || align > (size_t{1} << 40)) {
    errno = ENOMEM;
    return nullptr;
  }
  const size_t need = align_up(size ? size : 1, 16);
  LockGuard g(g_fork_heap_lock);
  uintptr_t start = g_fork_nchunks ? align_up(g_fork_next + 16, align) : 0;
  if (g_fork_nchunks == 0 || start + need > g_fork_chunks[g_fork_nchunks - 1].end) {
    const size_t least = size_t{1} << (20 + (g_fork_nchunks < 20 ? g_fork_nchunks : 20));
    size_t n = align_up(need + align + 16, kPage);
    if (n < least) n = least;
    void* m = g_fork_nchunks < kForkHeapChunks ? rt().os.reserve(n) : nullptr;
    if (m != nullptr && !rt().os.commit(m, n)) {
      (void)rt().os.unmap(m, n);
      m = nullptr;
    }
    if (m == nullptr) {
      errno = ENOMEM;
      return nullptr;
    }
    g_fork_chunks[g_fork_nchunks++] = {addr(m), addr(m) + n};
    start = align_up(addr(m) + 16, align);
  }
  g_fork_next = start + need;
  std::memcpy(ptr(start - 16), &size, sizeof size);
  return ptr(start);  // fresh mappings read as zero
}

// The size of a block of the child's own heap; 0 for any other pointer.
size_t fork_heap_size(const void* p) {
  LockGuard g(g_fork_heap_lock);
  for (size_t i = 0; i < g_fork_nchunks; i++)
    if (addr(p) >= g_fork_chunks[i].base && addr(p) < g_fork_chunks[i].end) {
      size_t s;
      std::memcpy(&s, static_cast<const unsigned char*>(p) - 16, sizeof s);
      return s;
    }
  return 0;
}

Mutex g_init_lock;
pthread_key_t g_cache_key;
Mutex g_caches_lock;
ThreadCache* g_live_caches = nullptr;
ThreadCache* g_free_caches = nullptr;

void thread_exit(void* arg) noexcept;
void unlink_cache(ThreadCache* tc);
void prefork() noexcept;
void postfork_parent() noexcept;
void postfork_child() noexcept;

// Enough memory awaits decay and the background thread sleeps (or was never
// started): wake it here, where this thread holds no lock.
DUCTILE_ALWAYS_INLINE void wake_background_if_rung() {
  if (DUCTILE_UNLIKELY(rt().chunks.take_signal())) rt().background.wake();
}

// The background thread is made by the call that first rings the doorbell,
// and making a thread allocates (pthread_create callocs the new thread's TLS
// vector). Made by a free, after the block went back, those allocations
// could take the block's own memory (a huge block's span became a slab
// region), and a second free of the block was then taken for the free of a
// slab object. So a free that hands `bytes` of a block straight to the chunk
// or huge layer makes the thread first, where they would ring the doorbell.
// Costs one relaxed load once the thread exists.
void make_background_before(size_t bytes) {
  if (DUCTILE_UNLIKELY(rt().background.unstarted()) && rt().chunks.would_ring(bytes)) rt().background.wake();
}

// ---- medium blocks -----------------------------------------------------
// A page run of its own for a block of class cls. `tagged` false leaves its
// first page without the page-map tag, so that its free takes the slow path
// (a sampled block, which may be of a small class too).
void* medium_from_chunks(size_t cls, size_t align, bool zero, bool tagged = true,
                         chunk::Space space = chunk::Space::kPlain) {
  size_t size = small::class_size(cls);
  chunk::Allocation a = rt().chunks.alloc(align_up(size, kPage), align < kPage ? kPage : align, SIZE_MAX, space);
  if (a.extent == nullptr) return nullptr;
  Extent* e = a.extent;
  e->kind = ExtentKind::kMedium;
  e->cached = 0;
  e->purging = 0;
  // Medium blocks end up in thread caches, which the background thread
  // collects (collect_cached_medium): their bytes ring its doorbell.
  rt().chunks.note_retained(e->size);
  e->size_class = static_cast<uint16_t>(cls);
  e->usable = size;
  if (tagged) rt().chunks.tag_first_page(e, small::free_tag(cls));
  if (zero && !a.zeroed) std::memset(ptr(e->base), 0, size);
  else if (kHardened && !a.zeroed) small::mark_word(ptr(e->base)) = 0;  // a freed mark left there
  return ptr(e->base);
}

// ---- thread caches -----------------------------------------------------
ThreadCache* create_cache() {
  // hardened:true without --enable-hardened: no caches, so that every call
  // reaches the checks without a test on the inline paths.
  if (t_state != kNoCache || t_cache_off || !rt().opts.tcache || (g_hardened && !kHardened) || g_fork_heap)
    return nullptr;
  t_state = kMakingCache;
  ThreadCache* tc;
  {
    LockGuard g(g_caches_lock);
    tc = g_free_caches;
    if (tc) g_free_caches = tc->next;
  }
  if (tc == nullptr) {
    void* mem = rt().chunks.meta().alloc(sizeof(ThreadCache), kPage);
    if (mem == nullptr) {
      t_state = kNoCache;
      return nullptr;
    }
    tc = new (mem) ThreadCache();
  }
  tc->init();
  {
    static std::atomic<uint32_t> next_set{0};
    tc->bin_set = next_set.fetch_add(1, std::memory_order_relaxed) % static_cast<uint32_t>(rt().nbinsets);
  }
  {
    LockGuard g(g_caches_lock);
    tc->prev = nullptr;
    tc->next = g_live_caches;
    if (g_live_caches) g_live_caches->prev = tc;
    g_live_caches = tc;
  }
  if (kProf) tc->prof_at = prof::initial_at();
  // Registers the destructor that gives the cache back at thread exit. It
  // may allocate (see kMakingCache), so the cache is not this thread's yet.
  if (pthread_setspecific(g_cache_key, tc) != 0) {
    // No destructor would give it back: this thread goes uncached.
    LockGuard g(g_caches_lock);
    unlink_cache(tc);
    t_state = kNoCache;
    return nullptr;
  }
  t_cache = tc;
  t_state = kHasCache;
  return tc;
}

DUCTILE_ALWAYS_INLINE ThreadCache* cache() {
  ThreadCache* tc = t_cache;
  return DUCTILE_LIKELY(tc != no_cache()) ? tc : create_cache();
}

// Returns the first n blocks of a cache bin (its slots: items) to where
// they came from.
void flush_objects(size_t cls, void** items, size_t n) {
  if (small::is_small_class(cls)) {
    small::Bin::flush_to_owners(rt().chunks, items, n);
    return;
  }
  make_background_before(n * small::class_size(cls));
  for (size_t i = 0; i < n; i++) {
    Extent* e = static_cast<Extent*>(items[2 * i + 1]);  // beside its address (thread_cache.h)
    if (kHardened) {
      if (e->state != chunk::ExtentState::kActive || e->kind != ExtentKind::kMedium)
        fatal_pointer("free(): double free detected", ptr(e->base));
      small::take_marked(ptr(e->base));
    }
    medium_take(e);
    rt().chunks.free(e);  // dirty, for the next user or for decay
  }
}

// A full cache bin gives back its older half.
void flush_half(ThreadCache* tc, size_t cls) {
  small::CacheBin& b = tc->bins[cls];
  const size_t cap = small::cache_cap(cls);
  size_t n = cap > 1 ? cap / 2 : 1;
  flush_objects(cls, b.items, n);
  const size_t slots = small::detail::slots_per_block(cls);
  std::memmove(b.items, b.items + n * slots, (b.count - n) * slots * sizeof(void*));
  b.count = static_cast<uint32_t>(b.count - n);
}

void flush_all(ThreadCache* tc) {
  for (size_t c = 0; c < small::kNumClasses; c++) {
    small::CacheBin& b = tc->bins[c];
    if (b.count) flush_objects(c, b.items, b.count);
    b.count = 0;
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
  // Its cached blocks go back dirty, and the slabs it emptied stay in their
  // bins: a thread's exit is no sign that the process is done with the
  // memory (the next thread usually wants it at once), so decay returns it
  // on its usual schedule, and the doorbell wakes the background thread when
  // what is retained reaches its mark. (Purging here made each of a stream
  // of short-lived threads fault in again what the one before gave back.)
  retire_cache(tc);
  wake_background_if_rung();
}

// ---- size dispatch -----------------------------------------------------
size_t huge_threshold() { return __atomic_load_n(&rt().huge.options().threshold, __ATOMIC_RELAXED); }

// The smallest class >= size whose objects are `align`-aligned (align <= a
// page): small objects sit at multiples of the class size from a page-aligned
// slab base; medium blocks are page aligned.
size_t class_for(size_t size, size_t align) {
  size_t cls = small::class_of(size);
  if (align > small::kMinAlign)
    while (small::is_small_class(cls) && small::class_size(cls) % align != 0) cls++;
  return cls;
}

// thread.allocated / thread.deallocated for the paths that bypass the
// thread cache's own counting: huge blocks, page-aligned medium blocks and
// in-place resizes (counted as jemalloc does: the new size allocated, the
// old one deallocated).
void count_bytes(size_t allocated, size_t deallocated) {
  if (!kStats && !kProf) return;  // the sampling clock runs on `allocated`
  if (ThreadCache* tc = own_cache()) {
    tc->allocated += allocated;
    tc->deallocated += deallocated;
  }
}

// Where a request of `size` bytes aligned to `align` (a power of two, or 0/1
// for none) is served, and the usable size it gets: alloc_impl serves it
// there, nallocx answers `usable`, and rallocx leaves a block exactly so.
struct Placement {
  enum Kind : uint8_t { kClass, kAlignedMedium, kHuge } kind;
  size_t cls;     // kClass and kAlignedMedium
  size_t usable;
};
Placement place(size_t size, size_t align) {
  if (size >= huge_threshold() || (align > kPage && size + align >= huge_threshold()))
    return {Placement::kHuge, 0, huge::HugeLayer::size_for(size)};
  if (align > kPage) {
    // Slab objects are aligned to at most a page: a medium block, aligned by the chunk layer.
    size_t cls = class_for(size > small::kMaxSmall ? size : small::kMaxSmall + 1, kPage);
    return {Placement::kAlignedMedium, cls, small::class_size(cls)};
  }
  size_t cls = class_for(size, align);
  return {Placement::kClass, cls, small::class_size(cls)};
}

// A slab region proved busy and asked for the prefault helper: start it here,
// where this thread holds no lock (creating a thread allocates).
DUCTILE_ALWAYS_INLINE void start_helper_if_asked() {
  if (DUCTILE_UNLIKELY(rt().prefault.start_pending())) (void)rt().prefault.start();
}

// A bounded decay step when one is due, from the slow paths of any class
// (where this thread holds no lock): idle classes' empty slabs go too, also
// without a background thread.
DUCTILE_ALWAYS_INLINE void decay_from_calls() { rt().decay.tick(); }

// `cached`: through the thread cache (false: MALLOCX_TCACHE_NONE, straight
// from the bin or the chunk layer).
void* alloc_class(size_t cls, bool zero, bool cached) {
  ThreadCache* tc = cached ? cache() : nullptr;
  if (tc) {
    small::CacheBin& b = tc->bins[cls];
    if (b.count == 0 && small::is_small_class(cls)) {
      b.count = static_cast<uint32_t>(
          rt().bins[tc->bin_set][cls].fill(b.items, small::cache_cap(cls) > 1 ? small::cache_cap(cls) / 2 : 1));
      start_helper_if_asked();
      decay_from_calls();
    }
    if (b.count != 0) {
      if (kStats || kProf) tc->allocated += small::class_size(cls);
      void* p = small::is_small_class(cls) ? cache_slot_out<false>(b) : cache_slot_out<true>(b);
      if (zero) std::memset(p, 0, small::class_size(cls));
      return p;
    }
    if (small::is_small_class(cls)) return nullptr;  // the bin could not fill
  } else if (small::is_small_class(cls)) {
    void* p = nullptr;
    ThreadCache* own = own_cache();
    if (rt().bins[own ? own->bin_set : 0][cls].fill(&p, 1) == 0) return nullptr;
    start_helper_if_asked();
    count_bytes(small::class_size(cls), 0);
    if (kHardened) small::take_marked(p);
    if (zero) std::memset(p, 0, small::class_size(cls));
    return p;
  }
  void* p = medium_from_chunks(cls, kPage, zero);
  if (p) count_bytes(small::class_size(cls), 0);
  return p;
}

// ---- sampled blocks (core/prof.h) --------------------------------------
// The sampling clock of a thread without a cache (tcache:false, exiting).
__thread uint64_t t_prof_allocated __attribute__((tls_model("initial-exec"))) = 0;
__thread uint64_t t_prof_at __attribute__((tls_model("initial-exec"))) = 0;
__thread uint64_t t_prof_rng __attribute__((tls_model("initial-exec"))) = 0;

// Whether this allocation of `usable` bytes is to be sampled. The clock of
// a thread cache counts its bytes where the block is handed out.
bool sample_due(size_t usable) {
  if (ThreadCache* tc = own_cache()) return prof::due({&tc->allocated, &tc->prof_at, &tc->prof_rng}, usable, false);
  return prof::due({&t_prof_allocated, &t_prof_at, &t_prof_rng}, usable, true);
}

prof::Sample* sample_of(const Extent* e) { return static_cast<prof::Sample*>(e->sample); }

// A sampled block: of its own (a page run below the huge threshold, with no
// page-map tag), its extent holding the sample. nullptr when no sample
// could be taken or no block had: the caller serves the request as usual.
void* alloc_sampled(size_t size, size_t align, bool zero, bool growing, const Placement& at) {
  prof::Sample* s = prof::record(at.usable);
  if (s == nullptr) return nullptr;
  void* p = at.kind == Placement::kHuge ? rt().huge.alloc(size, align, zero, growing)
                                        : medium_from_chunks(at.cls, align, zero, false);
  if (p == nullptr) {
    prof::release(s);
    return nullptr;
  }
  rt().chunks.lookup(p)->sample = s;
  count_bytes(at.usable, 0);
  return p;
}

// Whether a growing medium block of `usable` bytes goes to the dense space
// (Runtime::growing_medium): where there is one, once kPlainGrowth bytes of
// them have been made in plain space.
bool dense_for_growth(size_t usable) {
  Runtime& r = rt();
  if (r.growing_medium == chunk::Space::kPlain) return false;
  if (r.plain_growth.load(std::memory_order_relaxed) >= Runtime::kPlainGrowth) return true;
  r.plain_growth.fetch_add(usable, std::memory_order_relaxed);
  return false;
}

// `growing`: the block replaces a smaller one (realloc): a huge one is
// densely used, and goes to huge-page space; a medium one, past the first
// few, to the dense space.
void* alloc_impl(size_t size, size_t align, bool zero, bool cached = true, bool growing = false) {
  if (DUCTILE_UNLIKELY(!ensure_ready())) {
    void* p = bootstrap_alloc(size, align);  // zeroed: static storage, never reused
    return p;
  }
  if (DUCTILE_UNLIKELY(g_fork_heap)) return fork_heap_alloc(size, align);
  if (DUCTILE_UNLIKELY(size > static_cast<size_t>(PTRDIFF_MAX))) {
    errno = ENOMEM;
    return nullptr;
  }
  const InCall in_call;
  void* p;
  const Placement at = place(size, align);
  if (kProf && DUCTILE_UNLIKELY(sample_due(at.usable)) &&
      (p = alloc_sampled(size, align, zero, growing, at)) != nullptr) {
    wake_background_if_rung();
    return p;
  }
  if (at.kind == Placement::kHuge) {
    p = rt().huge.alloc(size, align, zero, growing);
    if (p) count_bytes(at.usable, 0);
  } else if (at.kind == Placement::kAlignedMedium) {
    p = medium_from_chunks(at.cls, align, zero);
    if (p) count_bytes(at.usable, 0);
  } else if (growing && !small::is_small_class(at.cls) && dense_for_growth(at.usable)) {
    p = medium_from_chunks(at.cls, kPage, zero, true, rt().growing_medium);
    if (p) count_bytes(at.usable, 0);
  } else {
    p = alloc_class(at.cls, zero, cached);
  }
  if (DUCTILE_UNLIKELY(p == nullptr)) errno = ENOMEM;
  wake_background_if_rung();
  return p;
}

// The sample goes with the block; the block goes straight back (a small
// class's page run has no cache bin to go to).
void dealloc_sampled(void* p, Extent* e) {
  if (DUCTILE_UNLIKELY(addr(p) != e->base)) return;  // not a block start: not ours to free
  prof::release(sample_of(e));
  e->sample = nullptr;
  count_bytes(0, e->usable);
  make_background_before(e->size);
  if (e->kind == ExtentKind::kHuge) rt().huge.free(e);
  else rt().chunks.free(e);
}

// The cache a free goes to. A thread's first free, made before it has a
// cache, goes straight back to the bin instead (nullptr): a thread that starts
// by freeing a block another thread allocated -- a neighbour of that thread's
// blocks -- then does not get it back from its next malloc (passive false
// sharing, the cache-scratch workload). Its second free, or first malloc,
// makes the cache, so a thread that only frees still frees through one.
ThreadCache* cache_for_free() {
  ThreadCache* tc = t_cache;
  if (DUCTILE_LIKELY(tc != no_cache())) return tc;
  if (t_state == kNoCache && !t_freed_uncached) {
    t_freed_uncached = true;
    return nullptr;
  }
  return create_cache();
}

// A freed small or medium block goes into the calling thread's cache (a full
// cache bin first gives back its older half); without a cache, straight back.
// `cached` false (MALLOCX_TCACHE_NONE): straight back in any case.
void cache_push(void* p, Extent* e, bool cached) {
  size_t cls = e->size_class;
  // A medium block in a thread cache (this one's or another thread's) is
  // free already: found here in every mode, before it could be handed out
  // twice (its extent is at hand).
  if (!small::is_small_class(cls) && __atomic_load_n(&e->cached, __ATOMIC_RELAXED) != 0)
    fatal_pointer("free(): double free detected", p);
  // Into a cache or straight into a bin, it is freed (small::take_marked).
  if (kHardened) small::mark_freed(p);
  ThreadCache* tc = cached ? cache_for_free() : nullptr;
  if (tc == nullptr) {
    count_bytes(0, small::class_size(cls));
    if (small::is_small_class(cls)) {
      small::Bin::flush_to_owners(rt().chunks, &p, 1);
    } else {
      make_background_before(e->size);
      rt().chunks.free(e);
    }
    return;
  }
  if (!small::is_small_class(cls)) (void)medium_put(e);
  small::CacheBin& b = tc->bins[cls];
  if (b.count >= b.limit) {
    flush_half(tc, cls);
    decay_from_calls();
  }
  if (kStats) tc->deallocated += small::class_size(cls);
  cache_slot_in(b, p, cls, e);
}

void dealloc_extent(void* p, Extent* e, bool cached = true) {
  if (kProf && DUCTILE_UNLIKELY(e->sample != nullptr)) return dealloc_sampled(p, e);
  switch (e->kind) {
    case ExtentKind::kSlab:
      cache_push(p, e, cached);
      return;
    case ExtentKind::kMedium:
      if (DUCTILE_UNLIKELY(addr(p) != e->base)) return;  // not a block start: not ours to free
      cache_push(p, e, cached);
      return;
    case ExtentKind::kHuge:
      if (DUCTILE_UNLIKELY(addr(p) != e->base)) return;
      if (kStats)
        if (ThreadCache* tc = own_cache()) tc->deallocated += e->usable;
      make_background_before(e->size);
      rt().huge.free(e);
      return;
    case ExtentKind::kNone:
      return;
  }
}

}  // namespace

Extent* owner_of(const void* p) noexcept {
  if (!g_ready.load(std::memory_order_acquire)) return nullptr;
  Extent* e = rt().chunks.lookup(p);
  if (e == nullptr || e->state != chunk::ExtentState::kActive || e->kind == ExtentKind::kNone ||
      addr(p) < e->base || addr(p) >= e->end())
    return nullptr;
  return e;
}

size_t usable_of(const Extent* e) noexcept {
  return e->kind == ExtentKind::kSlab ? small::class_size(e->size_class) : e->usable;
}

namespace {

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
size_t g_collect_next = 0;             // where the last step's scan stopped (g_collect_lock)

// Takes up to n cached medium blocks into out, from the cache list (its
// lock held), resuming after the ones the last step took.
__attribute__((no_sanitize("thread"))) size_t scan_cached_medium(void** out, size_t n) {
  LockGuard g(g_caches_lock);
  size_t seen = 0, got = 0;
  for (ThreadCache* tc = g_live_caches; tc != nullptr && got < n; tc = tc->next)
    for (size_t c = small::kNumSmall; c < small::kNumClasses && got < n; c++) {
      const small::CacheBin& b = tc->bins[c];
      const uint32_t count = __atomic_load_n(&b.count, __ATOMIC_RELAXED);
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

// One decay step of every layer that retains memory for the decay time,
// and of the thread caches' medium blocks. True while something still
// awaits it.
bool background_step() noexcept {
  bool pending = rt().decay.step().pending;
  if (collect_cached_medium()) pending = true;
  return pending;
}

}  // namespace

__attribute__((weak)) os::Kernel& runtime_kernel() noexcept { return os::linux_kernel(); }
namespace {
void prof_at_exit() { prof::at_exit(); }
}  // namespace

Runtime::Runtime(const Options& o) noexcept
    : opts(o),
      os(runtime_kernel()),
      chunks(os, clock,
             [&] {
               chunk::Options c;
               c.decay_ns = o.decay_ms * 1000000u;
               c.storage_zeroed = true;  // g_runtime is static storage, constructed once
               return c;
             }()),
      huge(chunks,
           [&] {
             huge::Options h;
             h.threshold = o.huge_threshold;
             h.thp = o.thp;
             h.guard = g_hardened;
             return h;
           }()) {
  prof::init(o);
  prefault.init(&os, o.prefault);
  // decay_ms:0 purges on free: nothing is left for a background thread.
  background.init(o.background_thread && o.decay_ms != 0, o.decay_ms * 1000000u, &background_step,
                  &background_arm);
  small::ArenaOptions a;
  a.thp = o.thp != huge::ThpPolicy::kNever;
  growing_medium = a.busy_space = dense_space(o.thp, os.features().thp);
  arena.init(&chunks, &prefault, a);
  // One set by default: once fills stopped walking free lists through cold
  // objects (the slab bitmap), a set per CPU no longer made thread-churn
  // faster (0.41 / 0.42 s) and cost larson 7.8 MiB of peak RSS against 5.7.
  // bin_sets:0 asks for one per CPU this process may run on (counted
  // without allocating).
  if (o.bin_sets != 0) {
    nbinsets = o.bin_sets;
  } else {
    cpu_set_t cpus;
    size_t ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? static_cast<size_t>(CPU_COUNT(&cpus)) : 1;
    nbinsets = ncpu == 0 ? 1 : ncpu < kMaxBinSets ? ncpu : kMaxBinSets;
  }
  for (size_t a = 0; a < nbinsets; a++)
    for (size_t c = 0; c < small::kNumSmall; c++) bins[a][c].init(c, &arena, g_hardened);
  decay.init(&bins[0][0], nbinsets * small::kNumSmall, &arena);
}

small::BinStats Runtime::class_stats(size_t cls) const noexcept {
  small::BinStats sum;
  for (size_t a = 0; a < nbinsets; a++) {
    small::BinStats b = bins[a][cls].stats();
    sum.slabs += b.slabs;
    sum.empty_slabs += b.empty_slabs;
    sum.free_objects += b.free_objects;
    sum.slab_allocs += b.slab_allocs;
    sum.slab_returns += b.slab_returns;
  }
  return sum;
}

bool ensure_ready() noexcept {
  if (DUCTILE_LIKELY(g_ready.load(std::memory_order_acquire))) return true;
  if (t_initialising) return false;
  t_initialising = true;
  // No signal handler runs on this thread while it makes the runtime: one
  // that allocated would get the start-up buffer alone, and one that forked
  // would leave its child a runtime half made.
  sigset_t all, old_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  g_init_lock.lock();
  if (!g_ready.load(std::memory_order_relaxed)) {
    const KeepErrno keep;  // the probes' and libc's refusals are no error of the caller's
    Options o;
    parse_options(DUCTILE_DEFAULT_CONF, o);
    parse_options(getenv("DUCTILE_CONF"), o);
    if (const char* s = getenv("DUCTILE_STATS"); s && *s && !set_option(o, "stats_print", s, std::strlen(s)))
      warn("DUCTILE_STATS: expected 1/0, true/false, yes/no or on/off; ignored");
    g_hardened = kHardened || o.hardened;
    if (g_hardened) {
      // AT_RANDOM's second half (the chunk layer's hint takes the first).
      if (auto* bytes = reinterpret_cast<const unsigned char*>(getauxval(AT_RANDOM)))
        std::memcpy(&small::g_freed_secret, bytes + 8, sizeof small::g_freed_secret);
      small::g_freed_secret |= 1;  // never 0: a zeroed block must not look freed at address 0
    }
    new (g_runtime) Runtime(o);
    pthread_key_create(&g_cache_key, thread_exit);
    pthread_atfork(prefork, postfork_parent, postfork_child);
    if (o.stats_print) print_stats_at_exit_on();
    if (kProf && o.prof && o.prof_final) atexit(prof_at_exit);
    g_huge_threshold = rt().huge.options().threshold;
    g_ready.store(true, std::memory_order_release);
  }
  g_init_lock.unlock();
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  t_initialising = false;
  return true;
}

Mutex& options_lock() noexcept { return g_init_lock; }

bool set_huge_threshold(size_t bytes) noexcept {
  if (!ensure_ready()) return false;
  char text[24];
  const size_t n = format_u64(bytes, text, sizeof text);
  Options checked;
  if (!set_option(checked, "huge_threshold", text, n)) return false;
  const size_t t = checked.huge_threshold;
  // The init lock serialises changes (it is taken around fork, too), so
  // that the three copies agree.
  LockGuard g(g_init_lock);
  __atomic_store_n(&rt().opts.huge_threshold, t, __ATOMIC_RELAXED);
  rt().huge.set_threshold(t);
  __atomic_store_n(&g_huge_threshold, t, __ATOMIC_RELAXED);
  return true;
}

void* alloc_slow(size_t size) noexcept { return alloc_impl(size, 0, false); }

void* alloc_aligned(size_t size, size_t align, bool zero) noexcept {
  if (!is_pow2(align)) {
    errno = EINVAL;
    return nullptr;
  }
  void* p = alloc_impl(size, align, zero);
  DUCTILE_ASSERT(p == nullptr || is_aligned(addr(p), align));
  return p;
}

namespace {

// A pointer that is no block of ours. Every mode reports what it can see
// without more loads than the slow path makes anyway: a pointer into no
// extent of ours, or one off the 8-byte grid (glibc's "free(): invalid
// pointer"), and one into free space -- a huge or medium block freed
// already ("double free"). Freeing it anyway would corrupt the heap.
// realloc says the same of the same pointers, in its own name.
// Before the first block of ours (nothing is ours yet: the runtime is not
// even set up) every pointer but a bootstrap one is foreign.
[[noreturn]] DUCTILE_NOINLINE void bad_free(void* p, bool by_realloc = false) noexcept {
  const Extent* e = g_ready.load(std::memory_order_acquire) ? rt().chunks.lookup(p) : nullptr;
  const bool freed = e != nullptr && e->state != chunk::ExtentState::kActive && addr(p) >= e->base &&
                     addr(p) < e->end() && is_aligned(addr(p), kPage);
  if (by_realloc) fatal_pointer(freed ? "realloc(): block freed already" : "realloc(): invalid pointer", p);
  fatal_pointer(freed ? "free(): double free detected" : "free(): invalid pointer", p);
}

// Hardened mode: p, inside active extent e, must be a block's start and
// not freed already: its freed mark (--enable-hardened; a second free that
// the inline path takes is found at the block's hand-out instead, see
// small::take_marked), or its slab's bitmap once it left the cache
// (Bin::flush).
void check_block(void* p, const Extent* e) noexcept {
  if (e->kind == ExtentKind::kSlab) {
    if ((addr(p) - e->base) % small::class_size(e->size_class) != 0) fatal_pointer("free(): invalid pointer", p);
  } else if (addr(p) != e->base) {
    fatal_pointer("free(): invalid pointer", p);
  }
  if (kHardened && e->kind != ExtentKind::kHuge && small::is_marked(p))
    fatal_pointer("free(): double free detected", p);
}

void dealloc_impl(void* p, bool cached) {
  if (p == nullptr || is_bootstrap(p) || g_fork_heap) return;
  const InCall in_call;
  Extent* e = owner_of(p);
  if (DUCTILE_UNLIKELY(e == nullptr || (addr(p) & 7) != 0)) bad_free(p);
  if (g_hardened) check_block(p, e);
  dealloc_extent(p, e, cached);
  wake_background_if_rung();
}

}  // namespace

void dealloc_slow(void* p) noexcept { dealloc_impl(p, true); }

void dealloc_sized_slow(void* p, size_t size, size_t align) noexcept {
  check_sized_free(p, size, align);
  dealloc_impl(p, true);
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

void decay_event(small::ThreadCache* tc) noexcept {
  const InCall in_call;
  static_assert(small::ThreadCache::kDecayEvent == small::Decay::kEvent);
  tc->decay_countdown = rt().decay.look();
}

void check_sized_free(void* p, size_t size, size_t align) noexcept {
  if (p != nullptr && !is_bootstrap(p)) {
    // The size must be one the block could have been allocated with: a
    // request of that size and alignment gets a block of this class, or
    // this usable size; or (a larger block that realloc left in place when
    // it shrank) at most its usable size and more than half of it.
    const Extent* e = owner_of(p);
    if (e != nullptr && (addr(p) & 7) == 0) {
      check_block(p, e);
      const size_t usable = usable_of(e);
      const Placement at = place(size, align);
      const bool fits = e->kind == ExtentKind::kSlab
                            ? at.kind == Placement::kClass && at.cls == e->size_class
                            : at.usable == usable || (size <= usable && size > usable / 2 - kPage);
      if (!fits) fatal_pointer("free_sized(): wrong size for block", p);
    }
  }
}

size_t usable_size(const void* p) noexcept {
  if (p == nullptr) return 0;
  if (is_bootstrap(p)) return bootstrap_size(p);
  if (g_fork_heap)
    if (size_t s = fork_heap_size(p)) return s;
  Extent* e = owner_of(p);
  return e ? usable_of(e) : 0;
}

size_t usable_size_for(size_t size, size_t align) noexcept {
  if (!ensure_ready() || size > static_cast<size_t>(PTRDIFF_MAX) || !is_pow2(align)) return 0;
  return place(size, align).usable;
}

size_t resize_in_place(void* p, size_t size, bool zero) noexcept {
  if (g_fork_heap) return usable_size(p);
  const InCall in_call;
  Extent* e = owner_of(p);
  if (e == nullptr) return 0;
  size_t old = usable_of(e);
  if (e->kind == ExtentKind::kHuge && size >= huge_threshold()) {
    size_t now = rt().huge.resize_in_place(e, size, zero);
    if (now != old) {
      count_bytes(now, old);
      if (kProf && e->sample != nullptr) prof::resize(sample_of(e), now);
    }
    return now;
  }
  if (e->kind == ExtentKind::kMedium && size < huge_threshold() && size > small::kMaxSmall) {
    size_t cls = small::class_of(size);
    size_t want = small::class_size(cls);
    if (want > e->size) {
      chunk::GrowResult g = rt().chunks.grow(e, want, false);
      if (g.path == chunk::GrowPath::kRefused) return old;
      if (zero && !g.zeroed) std::memset(ptr(e->base + old), 0, want - old);
    } else if (want < e->size && !rt().chunks.shrink(e, want)) {
      return old;
    }
    e->size_class = static_cast<uint16_t>(cls);
    e->usable = want;
    if (kProf && e->sample != nullptr) prof::resize(sample_of(e), want);  // and stays untagged
    else rt().chunks.tag_first_page(e, small::free_tag(cls));  // grow and shrink cleared it
    count_bytes(want, old);
    return want;
  }
  return old;  // small blocks, and moves between ranges, cannot be done in place
}

namespace {

// Whether realloc grows the medium block e to `size` as a huge block, below
// the huge threshold: where e is in the dense space (a buffer grown from
// small sizes, in a process past the first MiB of such) and `size` is at
// least half the threshold. Its span's headroom then takes the next
// doublings in place, and the copy at the threshold goes: half of what such
// a buffer copied on its way up (1 MiB of 2). The cost, where it stops
// growing there: its huge page, up to 1 MiB more resident than the block.
// `old` is e's usable size.
bool grows_huge(const Extent* e, size_t old, size_t size) {
  if (e->kind != ExtentKind::kMedium || e->space == chunk::Space::kPlain) return false;
  const size_t threshold = huge_threshold();
  return size > old && size >= threshold / 2 && size < threshold;
}

// Whether the medium block e (usable size `old`), grown to `size` aligned
// to `align`, becomes a huge block that may take over its pages rather than
// a copy of them (huge: alloc_from, which moves them onto a clean span): a
// block of half a huge page or more in plain space (an untouched 1 MiB
// block copied into its new block's huge page made 2 MiB resident for
// nothing). Below half a huge page the copy is small, and the moved pages
// would leave most of the huge page the block starts in to 4 KiB faults; a
// dense block (grows_huge) was written as it grew, and lies in huge pages
// that moving part of one would split. A sampled block keeps its own path.
bool brings_pages(const Extent* e, size_t old, size_t size, size_t align) {
  if (e->kind != ExtentKind::kMedium || e->space != chunk::Space::kPlain || e->size < kHugePage / 2) return false;
  if (kProf && e->sample != nullptr) return false;
  return size > old && align <= kHugePage && place(size, align).kind == Placement::kHuge;
}

// realloc (`exact` false) and rallocx (`exact` true, where the block is left
// with exactly the usable size nallocx(size, flags) answers: a shrinking
// medium block shrinks in place or moves, as in jemalloc).
void* reallocate_impl(void* p, size_t size, size_t align, bool zero, bool exact, bool cached) {
  if (align != 0 && !is_pow2(align)) {
    errno = EINVAL;
    return nullptr;
  }
  if (p == nullptr) return alloc_impl(size, align, zero, cached);
  if (DUCTILE_UNLIKELY(size > static_cast<size_t>(PTRDIFF_MAX))) {
    errno = ENOMEM;
    return nullptr;
  }
  if (DUCTILE_UNLIKELY(g_fork_heap)) {
    const size_t old = usable_size(p);
    void* q = fork_heap_alloc(size, align);
    if (q != nullptr) std::memcpy(q, p, old < size ? old : size);
    return q;  // the old block stays where it is
  }
  const InCall in_call;
  // Off the 8-byte grid: no block of ours, as free() would say. (Before the
  // first block of ours, a pointer on the grid finds no tag and no owner
  // below, and is refused there, as free() refuses it.)
  if (DUCTILE_UNLIKELY((addr(p) & 7) != 0)) bad_free(p, true);
  // A small object (its page's tag gives the class, as for free): stay in
  // the class, or move through the inline malloc and free -- a thread-cache
  // pop and push -- without the extent (realloc-heavy code grows small
  // strings and vectors this way all the time).
  if (align == 0 && !zero && cached) {
    const size_t cls = small::tag_class(chunk::PageMap::entry_tag(rt().chunks.lookup_entry(p)));
    if (cls < small::kNumSmall) {
      const size_t old = small::class_size(cls);
      if (size <= old && small::class_of(size) == cls) return p;
      // Past the small classes the new block is a growing one (alloc_impl's
      // `growing`), as from a medium block.
      void* q = size > small::kMaxSmall ? alloc_impl(size, 0, false, true, true) : alloc(size);
      if (q == nullptr) return nullptr;  // errno is set; the old block is intact
      std::memcpy(q, p, old < size ? old : size);
      dealloc(p);
      return q;
    }
  }
  size_t old;
  Extent* e = nullptr;
  bool to_huge = false;  // grows_huge, for realloc
  if (is_bootstrap(p)) {
    old = bootstrap_size(p);
  } else {
    e = owner_of(p);
    // Not a block of ours, or one freed already: as free() would.
    if (DUCTILE_UNLIKELY(e == nullptr)) bad_free(p, true);
    old = usable_of(e);
    to_huge = !exact && align <= kPage && grows_huge(e, old, size);
    // Past half the threshold a huge block stays huge as realloc grows it
    // (grows_huge makes such blocks).
    if (e->kind == ExtentKind::kHuge &&
        (size >= huge_threshold() || (!exact && size > old && size >= huge_threshold() / 2))) {
      // A sampled block's sample follows it, moved or not, with its new size.
      prof::Sample* s = kProf ? sample_of(e) : nullptr;
      e->sample = nullptr;
      void* q = rt().huge.resize(e, size, align < kPage ? kPage : align, zero);
      if (q == nullptr) errno = ENOMEM;
      else count_bytes(huge::HugeLayer::size_for(size), old);
      if (s != nullptr) {
        Extent* now = rt().chunks.lookup(q != nullptr ? q : p);
        now->sample = s;
        if (q != nullptr) prof::resize(s, now->usable);
      }
      return q;
    }
    bool aligned = align <= small::kMinAlign || is_aligned(addr(p), align);
    if (exact) {
      // Stay only as what a new block would be: the same class, or a medium
      // block resized in place to it.
      const Placement at = place(size, align);
      if (aligned && at.kind != Placement::kHuge && at.cls == e->size_class && e->kind != ExtentKind::kHuge)
        return p;
      if (aligned && e->kind == ExtentKind::kMedium && at.kind != Placement::kHuge &&
          !small::is_small_class(at.cls) && resize_in_place(p, at.usable, zero) == at.usable)
        return p;
    } else {
      // Same class, or a smaller one not worth moving for: stay.
      if (aligned && size <= old &&
          (e->kind == ExtentKind::kSlab ? small::class_of(size) == e->size_class
                                        : size > old / 2 && e->kind != ExtentKind::kHuge))
        return p;
      // (Not a dense buffer on its way to the huge range: that one moves
      // there now, and grows in place from then on.)
      if (aligned && e->kind == ExtentKind::kMedium && size > small::kMaxSmall && size < huge_threshold() &&
          !to_huge && resize_in_place(p, size, zero) >= size)
        return p;
    }
  }
  bool moved = false;  // e's pages are the new block's (huge: alloc_from)
  void* q = nullptr;
  if (e != nullptr && brings_pages(e, old, size, align)) q = rt().huge.alloc_from(e, size, zero, &moved);
  else if (to_huge) q = rt().huge.alloc(size, kPage, zero, true);
  if (q != nullptr) count_bytes(huge::HugeLayer::size_for(size), 0);
  else q = alloc_impl(size, align, zero, cached, size > old);
  if (q == nullptr) return nullptr;  // the old block is intact
  if (moved) {
    count_bytes(0, old);
    return q;
  }
  std::memcpy(q, p, old < size ? old : size);
  if (e) dealloc_extent(p, e, cached);
  return q;
}

}  // namespace

void* reallocate(void* p, size_t size) noexcept { return reallocate_impl(p, size, 0, false, false, true); }

void* reallocate_aligned(void* p, size_t size, size_t align, bool zero, bool cached) noexcept {
  return reallocate_impl(p, size, align, zero, true, cached);
}

void* alloc_aligned_uncached(size_t size, size_t align, bool zero) noexcept {
  if (!is_pow2(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return alloc_impl(size, align, zero, false);
}

void dealloc_uncached(void* p) noexcept { dealloc_impl(p, false); }

small::ThreadCache* thread_cache() noexcept {
  if (!ensure_ready()) return nullptr;
  return cache();
}

void flush_thread_cache() noexcept {
  if (!g_ready.load(std::memory_order_acquire) || g_fork_heap) return;
  const InCall in_call;
  if (ThreadCache* tc = own_cache()) flush_all(tc);
}

bool thread_cache_enabled() noexcept {
  return !t_cache_off && rt().opts.tcache && !(g_hardened && !kHardened);
}

void set_thread_cache_enabled(bool on) noexcept {
  if (!ensure_ready() || g_fork_heap) return;
  const InCall in_call;
  t_cache_off = !on;
  if (on) return;  // the next slow path makes the cache
  if (ThreadCache* tc = own_cache()) {
    t_cache = no_cache();
    t_state = kNoCache;
    pthread_setspecific(g_cache_key, nullptr);
    retire_cache(tc);
  }
}

size_t trim() noexcept {
  if (!g_ready.load(std::memory_order_acquire) || g_fork_heap) return 0;
  const InCall in_call;
  if (ThreadCache* tc = own_cache()) flush_all(tc);
  rt().for_each_bin([](small::Bin& b) { b.trim(); });
  size_t bytes = rt().arena.trim();
  return bytes + rt().chunks.trim();
}

namespace {

// First stdio's list lock (stdio_fork.h), then the fork gate: work in
// flight (fork_gate.h) finishes, holding no lock of the forking thread's;
// then ductile's locks. The list lock must come before the gate: a thread
// in getline holds its FILE's lock and may wait at the closed gate in
// realloc, one in fflush(NULL) holds the list and waits for that FILE, and
// a fork that closed the gate first then waited for the list forever. Work
// in flight never calls stdio, so it finishes while fork holds the list.
// The init lock is also the options lock (mallctl's writes).
// A fork from a signal handler that interrupted this thread inside the
// allocator -- in one of its calls (InCall), holding one of its locks,
// inside the fork gate, or in these handlers themselves (a signal during
// fork) -- must not wait for what the interrupted code holds: it would wait
// for itself. Such a fork takes nothing (the parent's handler then has
// nothing to give back). The child re-creates every lock as any child does,
// and allocates from a heap of its own (g_fork_heap): the inherited one has
// the interrupted operation half done. Counted per thread: such forks nest
// inside a fork of its own.
__thread bool t_forking __attribute__((tls_model("initial-exec"))) = false;
__thread unsigned t_forks_taking_nothing __attribute__((tls_model("initial-exec"))) = 0;

bool inside_allocator() noexcept { return t_forking || t_calls != 0 || t_locks_held != 0 || ForkGate::inside(); }

void prefork() noexcept {
  if (inside_allocator()) {
    t_forks_taking_nothing++;
    return;
  }
  t_forking = true;
  stdio_fork::prepare();
  ForkGate::close();
  g_init_lock.lock();
  g_caches_lock.lock();
  prof::prefork();
  rt().for_each_bin([](small::Bin& b) { b.prefork(); });
  rt().arena.prefork();
  rt().prefault.prefork();
  rt().background.prefork();
  small::SlabPool::prefork();
  rt().huge.prefork();
  rt().chunks.prefork();
}

void postfork_parent() noexcept {
  if (t_forks_taking_nothing != 0) {
    t_forks_taking_nothing--;
    return;
  }
  rt().chunks.postfork_parent();
  rt().huge.postfork_parent();
  small::SlabPool::postfork_parent();
  rt().background.postfork_parent();
  rt().prefault.postfork_parent();
  rt().arena.postfork_parent();
  rt().for_each_bin([](small::Bin& b) { b.postfork_parent(); });
  prof::postfork_parent();
  g_caches_lock.unlock();
  g_init_lock.unlock();
  ForkGate::open();
  stdio_fork::parent();
  t_forking = false;
}

void postfork_child() noexcept {
  // Taking nothing (see prefork): the locks are re-created all the same,
  // stdio's list lock is left to the C library, and this thread keeps
  // count of the locks the interrupted code holds (it gives them back
  // when the handler returns).
  const bool took_nothing = t_forks_taking_nothing != 0;
  t_forks_taking_nothing = 0;
  const unsigned held_before = took_nothing ? t_locks_held : 0;
  rt().chunks.postfork_child();
  rt().huge.postfork_child();
  small::SlabPool::postfork_child();
  rt().background.postfork_child();
  rt().prefault.postfork_child();
  rt().arena.postfork_child();
  rt().for_each_bin([](small::Bin& b) { b.postfork_child(); });
  prof::postfork_child();
  g_caches_lock.reinit_after_fork();
  g_init_lock.reinit_after_fork();
  g_collect_lock.reinit_after_fork();  // the parent's background thread may have held it
  t_locks_held = held_before;
  if (!took_nothing) stdio_fork::child();
  ForkGate::reset_in_child();
  rt().os.after_fork_in_child();
  // The other threads do not exist in the child. Their caches may have been
  // in the middle of an operation (a flush half done), so their contents
  // cannot be trusted: the blocks in them stay allocated (as with jemalloc),
  // and the cache records go back to the pool for the child's new threads.
  ThreadCache* mine = own_cache();
  ThreadCache* tc = g_live_caches;
  while (tc != nullptr) {
    ThreadCache* next = tc->next;
    if (tc != mine) unlink_cache(tc);
    tc = next;
  }
  if (!took_nothing) {
    t_forking = false;
    return;
  }
  // The heap is the parent's with an operation half done: the child
  // allocates from a heap of its own, and this thread has no cache.
  g_fork_heap_lock.reinit_after_fork();
  g_fork_heap = true;
  t_cache = no_cache();
}

// The prefault helper is stopped and joined when the process exits normally.
__attribute__((destructor)) void stop_helper_at_exit() {
  if (!g_ready.load(std::memory_order_acquire)) return;
  rt().prefault.stop();
  rt().background.stop();
}

}  // namespace

bool inside_allocator_now() noexcept { return inside_allocator(); }

}  // namespace ductile::core
