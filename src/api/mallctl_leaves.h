// SPDX-License-Identifier: BSD-2-Clause
// mallctl, mallctlnametomib, mallctlbymib and malloc_stats_print.
//
// The namespace is a static tree: inner nodes have named children or one
// child that matches an integer component ("arena.<i>.purge"); leaves have a
// handler. A MIB holds, per component, the child's position among its
// siblings, or the integer itself for an integer component, as jemalloc's
// does. Reads and writes follow jemalloc's rules (jemalloc(3), RETURN
// VALUES): a read needs *oldlenp == sizeof the value, else as much as fits is
// copied, *oldlenp says how much, and the answer is EINVAL; a write needs
// newlen == sizeof the value (EINVAL); writing a read-only value, or reading
// or writing a void one, is EPERM; an unknown name is ENOENT.
#include <errno.h>
#include <sys/types.h>

#include <atomic>
#include <climits>
#include <cstring>

#include "base/lock.h"
#include "core/options.h"
#include "core/prof.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"

using namespace ductile;
using core::StatsSnapshot;

namespace {

// The one arena's index, and jemalloc's index for "all arenas".
constexpr size_t kArenasAll = MALLCTL_ARENAS_ALL;
// Longest name component, and deepest name, we accept.
constexpr size_t kMaxComponent = 64;
constexpr size_t kMaxDepth = 8;

struct Req {
  void* oldp;
  size_t* oldlenp;
  void* newp;
  size_t newlen;
};

using Ctl = int (*)(Req& r, const size_t* mib, size_t miblen);

struct Node {
  const char* name;
  Ctl ctl;                 // leaves only
  const Node* kids;        // named children
  size_t nkids;
  const Node* indexed;     // the child an integer component leads to
  bool (*index_ok)(size_t);
};

// ---- jemalloc's read/write rules ---------------------------------------
template <typename T>
int read_value(Req& r, const T& v) {
  if (r.oldp == nullptr || r.oldlenp == nullptr) return 0;
  if (*r.oldlenp != sizeof(T)) {
    size_t n = *r.oldlenp < sizeof(T) ? *r.oldlenp : sizeof(T);
    std::memcpy(r.oldp, &v, n);
    *r.oldlenp = n;
    return EINVAL;
  }
  std::memcpy(r.oldp, &v, sizeof(T));
  return 0;
}

// 0, or EINVAL for a write of the wrong size; `out` is set when written.
template <typename T>
int take_write(Req& r, T* out, bool* written) {
  *written = false;
  if (r.newp == nullptr) return 0;
  if (r.newlen != sizeof(T)) return EINVAL;
  std::memcpy(out, r.newp, sizeof(T));
  *written = true;
  return 0;
}

bool writes(const Req& r) { return r.newp != nullptr || r.newlen != 0; }

template <typename T>
int read_only(Req& r, const T& v) {
  if (writes(r)) return EPERM;
  return read_value(r, v);
}

// A void value: an action, neither read nor written.
int action(Req& r) {
  return r.oldp != nullptr || r.oldlenp != nullptr || writes(r) ? EPERM : 0;
}

StatsSnapshot& snapshot(StatsSnapshot& s) {
  core::take_snapshot(s);
  return s;
}

// ---- leaves ------------------------------------------------------------
std::atomic<uint64_t> g_epoch{1};

int ctl_version(Req& r, const size_t*, size_t) {
  const char* v = PACKAGE_VERSION;
  return read_only(r, v);
}

int ctl_epoch(Req& r, const size_t*, size_t) {
  uint64_t v;
  bool written;
  if (int e = take_write(r, &v, &written)) return e;
  // Statistics are read live; a write only moves the epoch on, as a refresh does.
  if (written) g_epoch.fetch_add(1, std::memory_order_relaxed);
  uint64_t now = g_epoch.load(std::memory_order_relaxed);
  return read_value(r, now);
}

#define DUCTILE_STAT(fn, type, expr)          \
  int fn(Req& r, const size_t*, size_t) {     \
    if (writes(r)) return EPERM;              \
    StatsSnapshot snap;                       \
    const StatsSnapshot& s = snapshot(snap);  \
    type v = static_cast<type>(expr);         \
    return read_value(r, v);                  \
  }

DUCTILE_STAT(ctl_stats_allocated, size_t, s.allocated)
DUCTILE_STAT(ctl_stats_active, size_t, s.active)
DUCTILE_STAT(ctl_stats_resident, size_t, s.resident)
DUCTILE_STAT(ctl_stats_mapped, size_t, s.mapped)
DUCTILE_STAT(ctl_stats_retained, size_t, s.retained)
DUCTILE_STAT(ctl_stats_metadata, size_t, s.metadata)

DUCTILE_STAT(ctl_chunk_reserved, size_t, s.chunk.reserved)
DUCTILE_STAT(ctl_chunk_reservations, size_t, s.chunk.reservations)
DUCTILE_STAT(ctl_chunk_active, size_t, s.chunk.active)
DUCTILE_STAT(ctl_chunk_dirty, size_t, s.chunk.dirty)
DUCTILE_STAT(ctl_chunk_clean, size_t, s.chunk.clean)
DUCTILE_STAT(ctl_chunk_allocs, uint64_t, s.chunk.allocs)
DUCTILE_STAT(ctl_chunk_frees, uint64_t, s.chunk.frees)
DUCTILE_STAT(ctl_chunk_purges, uint64_t, s.chunk.purges)
DUCTILE_STAT(ctl_chunk_purged_bytes, uint64_t, s.chunk.purged_bytes)
DUCTILE_STAT(ctl_chunk_map_pages, size_t, s.chunk.map_pages)
DUCTILE_STAT(ctl_chunk_map_released, uint64_t, s.chunk.map_released)

DUCTILE_STAT(ctl_huge_allocs, uint64_t, s.huge_layer.allocs)
DUCTILE_STAT(ctl_huge_frees, uint64_t, s.huge_layer.frees)
DUCTILE_STAT(ctl_huge_shrinks, uint64_t, s.huge_layer.shrinks)
DUCTILE_STAT(ctl_huge_active, size_t, s.huge_layer.active_bytes)
DUCTILE_STAT(ctl_huge_spans, size_t, s.huge_layer.span_bytes)

DUCTILE_STAT(ctl_small_allocated, size_t, s.small.allocated)
DUCTILE_STAT(ctl_small_regions, size_t, s.arena.regions)
DUCTILE_STAT(ctl_small_advised, size_t, s.arena.advised)
DUCTILE_STAT(ctl_small_dense, size_t, s.arena.dense)
DUCTILE_STAT(ctl_small_region_dirty, size_t, s.arena.dirty_pages * kPage)
DUCTILE_STAT(ctl_prefault_running, bool, s.prefault.running)
DUCTILE_STAT(ctl_prefault_starts, uint64_t, s.prefault.starts)
DUCTILE_STAT(ctl_prefault_bytes, uint64_t, s.prefault.bytes)
DUCTILE_STAT(ctl_small_active, size_t, s.small.active)
DUCTILE_STAT(ctl_medium_allocated, size_t, s.medium.allocated)
DUCTILE_STAT(ctl_huge_allocated, size_t, s.huge.allocated)

#undef DUCTILE_STAT

template <size_t Path>
int ctl_growth(Req& r, const size_t*, size_t) {
  if (writes(r)) return EPERM;
  uint64_t v = core::rt().huge.stats().growth[Path];
  return read_value(r, v);
}

template <os::Call C>
int ctl_os_calls(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().os.counters().get(C));
}
int ctl_os_purged_bytes(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().os.counters().purged_bytes.load(std::memory_order_relaxed));
}
int ctl_os_purged_ranges(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().os.counters().purged_ranges.load(std::memory_order_relaxed));
}

// The mapping budget near vm.max_map_count (os/map_budget.h).
int ctl_maps_limit(Req& r, const size_t*, size_t) { return read_only(r, core::rt().os.map_budget().limit()); }
int ctl_maps_threshold(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().os.map_budget().threshold());
}
int ctl_maps_count(Req& r, const size_t*, size_t) { return read_only(r, core::rt().os.map_budget().last_count()); }
int ctl_maps_counts(Req& r, const size_t*, size_t) { return read_only(r, core::rt().os.map_budget().counts()); }
int ctl_maps_tight(Req& r, const size_t*, size_t) { return read_only(r, core::rt().os.map_budget().tight()); }
int ctl_maps_splits_avoided(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().os.counters().splits_avoided.load(std::memory_order_relaxed));
}

int ctl_trim(Req& r, const size_t*, size_t) {
  if (writes(r)) return EPERM;
  size_t purged = core::trim();
  return read_value(r, purged);
}

// thread.*: the calling thread's counters live in its cache.
__thread uint64_t t_no_counter __attribute__((tls_model("initial-exec"))) = 0;

template <bool Allocated>
int ctl_thread_counter(Req& r, const size_t*, size_t) {
  if (!kStats) return ENOENT;
  small::ThreadCache* tc = core::own_cache();
  uint64_t v = tc == nullptr ? 0 : Allocated ? tc->allocated : tc->deallocated;
  return read_only(r, v);
}

template <bool Allocated>
int ctl_thread_counter_ptr(Req& r, const size_t*, size_t) {
  if (!kStats) return ENOENT;
  if (writes(r)) return EPERM;
  // The counters live in the thread's cache: make it now (without counting
  // an allocation of our own), so the pointer stays valid for the thread.
  small::ThreadCache* tc = core::thread_cache();
  uint64_t* p = tc == nullptr ? &t_no_counter : Allocated ? &tc->allocated : &tc->deallocated;
  return read_value(r, p);
}

// The core offers no cache flush of its own: trim flushes the calling
// thread's cache and also purges what is retained.
int ctl_purge(Req& r, const size_t*, size_t) {
  if (int e = action(r)) return e;
  (void)core::trim();
  return 0;
}

// Arenas. ductile has one arena (with its sets of bins). arenas.create hands
// out new indices, as jemalloc's does, so that programs that make an arena
// of their own and pass MALLOCX_ARENA(a) keep working; every index is served
// by the one arena. Extent hooks cannot be had: arenas.create with hooks is
// EPERM. The indices fit MALLOCX_ARENA's 12 bits (index + 1, and 4096 is
// MALLCTL_ARENAS_ALL); past the last one arenas.create is EAGAIN.
constexpr unsigned kMaxArenas = 4095;
std::atomic<unsigned> g_narenas{1};
__thread unsigned t_arena __attribute__((tls_model("initial-exec"))) = 0;  // thread.arena

bool arena_index_ok(size_t i) { return i < g_narenas.load(std::memory_order_acquire) || i == kArenasAll; }

int ctl_narenas(Req& r, const size_t*, size_t) { return read_only(r, g_narenas.load(std::memory_order_acquire)); }

int ctl_arenas_create(Req& r, const size_t*, size_t) {
  void* hooks = nullptr;  // jemalloc's extent_hooks_t *; null asks for the default ones
  bool written;
  if (int e = take_write(r, &hooks, &written)) return e;
  if (hooks != nullptr) return EPERM;
  unsigned n = g_narenas.load(std::memory_order_relaxed);
  do {
    if (n >= kMaxArenas) return EAGAIN;
  } while (!g_narenas.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel));
  return read_value(r, n);
}

// The arena the calling thread is bound to: any existing index may be set
// (EFAULT for one that does not exist, as jemalloc); all are the one arena.
int ctl_thread_arena(Req& r, const size_t*, size_t) {
  const unsigned old = t_arena;
  unsigned v;
  bool written;
  if (int e = take_write(r, &v, &written)) return e;
  if (written) {
    if (v >= g_narenas.load(std::memory_order_acquire)) return EFAULT;
    t_arena = v;
  }
  return read_value(r, old);
}

// Explicit thread caches (tcache.create, MALLOCX_TCACHE(t)): indices are
// handed out and taken back as jemalloc's are, and a block allocated or freed
// with MALLOCX_TCACHE(t) goes through the calling thread's own cache, so
// tcache.flush and tcache.destroy flush that one. The indices fit
// MALLOCX_TCACHE's 12 bits (index + 2).
constexpr unsigned kMaxTcaches = 4094;
std::atomic<uint64_t> g_tcaches[(kMaxTcaches + 63) / 64];  // bit set: created, not destroyed

int ctl_tcache_create(Req& r, const size_t*, size_t) {
  if (writes(r)) return EPERM;
  for (unsigned w = 0; w < sizeof g_tcaches / sizeof g_tcaches[0]; w++) {
    uint64_t bits = g_tcaches[w].load(std::memory_order_relaxed);
    while (~bits != 0) {
      const unsigned b = static_cast<unsigned>(__builtin_ctzll(~bits));
      const unsigned index = w * 64 + b;
      if (index >= kMaxTcaches) return EFAULT;  // as jemalloc, when none is left
      if (g_tcaches[w].compare_exchange_weak(bits, bits | uint64_t{1} << b, std::memory_order_acq_rel))
        return read_value(r, index);
    }
  }
  return EFAULT;
}

// tcache.flush and tcache.destroy: write-only, an unsigned index (EINVAL
// without one, as jemalloc; EFAULT for one that cannot exist, where
// jemalloc does not check).
template <bool Destroy>
int ctl_tcache_flush(Req& r, const size_t*, size_t) {
  if (r.oldp != nullptr || r.oldlenp != nullptr) return EPERM;
  unsigned index = UINT_MAX;
  bool written;
  if (int e = take_write(r, &index, &written)) return e;
  if (!written) return EINVAL;
  if (index >= kMaxTcaches) return EFAULT;
  core::flush_thread_cache();
  if (Destroy) g_tcaches[index / 64].fetch_and(~(uint64_t{1} << (index % 64)), std::memory_order_acq_rel);
  return 0;
}
int ctl_page(Req& r, const size_t*, size_t) { return read_only(r, kPage); }

// Size classes as jemalloc names them. The quantum is the step of the
// classes up to 256 bytes and the alignment of every block of 16 bytes or
// more. Bins are the small classes (objects in slabs); large extents are
// the medium classes (page runs) a request below the huge threshold can
// get -- from the threshold on, blocks are page multiples, not classes.
int ctl_quantum(Req& r, const size_t*, size_t) { return read_only(r, small::kAbiAlign); }
int ctl_nbins(Req& r, const size_t*, size_t) { return read_only(r, static_cast<unsigned>(small::kNumSmall)); }
bool bin_index_ok(size_t i) { return i < small::kNumSmall; }
// arenas.bin.<i>.size: the index is the name's third component.
int ctl_bin_size(Req& r, const size_t* mib, size_t) { return read_only(r, small::class_size(mib[2])); }
size_t nlextents() {
  const size_t threshold = __atomic_load_n(&core::g_huge_threshold, __ATOMIC_RELAXED);
  return small::class_of(threshold - 1) + 1 - small::kNumSmall;
}
int ctl_nlextents(Req& r, const size_t*, size_t) { return read_only(r, static_cast<unsigned>(nlextents())); }
bool lextent_index_ok(size_t i) { return i < nlextents(); }
int ctl_lextent_size(Req& r, const size_t* mib, size_t) {
  if (mib[2] >= nlextents()) return ENOENT;  // the threshold moved since the MIB was made
  return read_only(r, small::class_size(small::kNumSmall + mib[2]));
}
// opt.tcache_max: the largest size a thread cache keeps, the largest class
// below the huge threshold.
int ctl_opt_tcache_max(Req& r, const size_t*, size_t) {
  return read_only(r, small::class_size(small::kNumSmall + nlextents() - 1));
}

// stats.arenas.<i>: every index is the one arena (MALLCTL_ARENAS_ALL too).
// Pages: active (in blocks' pages) and dirty (free, retained, maybe resident).
int ctl_arena_pactive(Req& r, const size_t*, size_t) {
  if (writes(r)) return EPERM;
  StatsSnapshot snap;
  const size_t v = snapshot(snap).active / kPage;
  return read_value(r, v);
}
int ctl_arena_pdirty(Req& r, const size_t*, size_t) {
  if (writes(r)) return EPERM;
  StatsSnapshot snap;
  const StatsSnapshot& s = snapshot(snap);
  const size_t v = s.chunk.dirty / kPage + s.arena.dirty_pages;
  return read_value(r, v);
}

// thread.tcache.enabled: bool, read-write; false flushes the calling
// thread's cache and leaves the thread without one until set true again.
int ctl_thread_tcache_enabled(Req& r, const size_t*, size_t) {
  const bool old = core::thread_cache_enabled();
  bool v;
  bool written;
  if (int e = take_write(r, &v, &written)) return e;
  if (written) core::set_thread_cache_enabled(v);
  return read_value(r, old);
}

// Decay time as jemalloc's ssize_t milliseconds: -1 for "never".
constexpr uint64_t kNeverMs = UINT64_MAX / 1000000u;  // the largest decay_ms accepted
ssize_t decay_as_ssize(uint64_t ms) {
  return ms >= kNeverMs || ms > static_cast<uint64_t>(SSIZE_MAX) ? -1 : static_cast<ssize_t>(ms);
}

// Sets decay_ms through the option table's parser, then in the chunk layer.
int set_decay_ms(uint64_t ms) {
  char text[24];
  const size_t n = format_u64(ms, text, sizeof text);
  LockGuard g(core::options_lock());
  core::Options o = core::rt().opts;
  if (!core::set_option(o, "decay_ms", text, n)) return EINVAL;
  core::rt().opts.decay_ms = o.decay_ms;
  core::rt().chunks.set_decay_ns(o.decay_ms * 1000000u);
  core::rt().background.set_decay(o.decay_ms * 1000000u);
  return 0;
}

// Read the old value, then write the new one (jemalloc's order for settings).
int ctl_opt_decay_ms(Req& r, const size_t*, size_t) {
  if (int e = read_value(r, core::rt().opts.decay_ms)) return e;
  uint64_t v;
  bool written;
  if (int e = take_write(r, &v, &written)) return e;
  return written ? set_decay_ms(v) : 0;
}

int ctl_arenas_dirty_decay_ms(Req& r, const size_t*, size_t) {
  if (int e = read_value(r, decay_as_ssize(core::rt().opts.decay_ms))) return e;
  ssize_t v;
  bool written;
  if (int e = take_write(r, &v, &written)) return e;
  if (!written) return 0;
  if (v < -1) return EFAULT;  // as jemalloc
  return set_decay_ms(v == -1 ? kNeverMs : static_cast<uint64_t>(v));
}

int ctl_opt_dirty_decay_ms(Req& r, const size_t*, size_t) {
  return read_only(r, decay_as_ssize(core::rt().opts.decay_ms));
}
// No muzzy stage: a purge gives pages back (MADV_DONTNEED) in one step,
// which is what jemalloc's muzzy_decay_ms:0 means.
int ctl_opt_muzzy_decay_ms(Req& r, const size_t*, size_t) { return read_only(r, ssize_t{0}); }
int ctl_opt_thp(Req& r, const size_t*, size_t) {
  huge::ThpPolicy p = core::rt().opts.thp;
  const char* v = p == huge::ThpPolicy::kAuto ? "auto" : p == huge::ThpPolicy::kAlways ? "always" : "never";
  return read_only(r, v);
}
int ctl_opt_huge_threshold(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.huge_threshold); }
int ctl_opt_tcache(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.tcache); }
// In effect: --enable-hardened makes it true whatever DUCTILE_CONF says.
int ctl_opt_hardened(Req& r, const size_t*, size_t) { return read_only(r, core::g_hardened); }
int ctl_opt_stats_print(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.stats_print); }
int ctl_opt_prefault(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.prefault); }
int ctl_opt_bin_sets(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.bin_sets); }
int ctl_opt_narenas(Req& r, const size_t*, size_t) { return read_only(r, 1u); }
int ctl_opt_background_thread(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().opts.background_thread);
}
// jemalloc's run-time switch: here whether the thread is enabled (it starts
// when memory awaits decay); fixed at start-up, so writing it is EPERM.
int ctl_background_thread(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().background.enabled());
}
// One background thread at most: reads 1; writing 1 is accepted, any other
// number is EINVAL (jemalloc's answer past its maximum).
int ctl_max_background_threads(Req& r, const size_t*, size_t) {
  const size_t old = 1;
  size_t v;
  bool written;
  if (int e = take_write(r, &v, &written)) return e;
  if (written && v != 1) return EINVAL;
  return read_value(r, old);
}

// Sampled heap profiling (core/prof.h), as jemalloc(3) describes it.
int ctl_opt_prof(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.prof); }
int ctl_opt_prof_active(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.prof_active); }
int ctl_opt_lg_prof_sample(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.lg_prof_sample); }
int ctl_opt_prof_prefix(Req& r, const size_t*, size_t) {
  const char* v = core::rt().opts.prof_prefix;
  return read_only(r, v);
}
int ctl_opt_prof_final(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.prof_final); }
int ctl_opt_prof_leak(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.prof_leak); }
int ctl_opt_lg_prof_interval(Req& r, const size_t*, size_t) {
  return read_only(r, static_cast<ssize_t>(core::rt().opts.lg_prof_interval));
}
int ctl_opt_prof_gdump(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.prof_gdump); }
int ctl_opt_prof_signal(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.prof_signal); }
int ctl_opt_stats_print_opts(Req& r, const size_t*, size_t) {
  const char* v = core::rt().opts.stats_print_opts;
  return read_only(r, v);
}

// prof.interval: the bytes between interval dumps, 2^lg_prof_interval; 0
// when there are none (lg_prof_interval:-1, or no opt.prof), as jemalloc.
int ctl_prof_interval(Req& r, const size_t*, size_t) {
  if (!kProf) return ENOENT;
  const int lg = core::prof::lg_interval();
  const uint64_t v = lg < 0 ? 0 : uint64_t{1} << lg;
  return read_only(r, v);
}

// A profiling switch, bool, read-write: jemalloc's rule for prof.active,
// which prof.gdump follows too: writing it needs opt.prof (ENOENT
// otherwise); it reads false without.
int prof_switch(Req& r, bool (*get)() noexcept, bool (*set)(bool) noexcept) {
  if (!kProf) return ENOENT;
  bool v;
  bool written;
  if (int e = take_write(r, &v, &written)) return e;
  bool old;
  if (written) {
    if (!core::prof::enabled()) return ENOENT;
    old = set(v);
  } else {
    old = get();
  }
  return read_value(r, old);
}

int ctl_prof_gdump(Req& r, const size_t*, size_t) { return prof_switch(r, core::prof::gdump, core::prof::set_gdump); }
int ctl_prof_active(Req& r, const size_t*, size_t) { return prof_switch(r, core::prof::active, core::prof::set_active); }

// Write-only: a const char * file name, or NULL for
// <prefix>.<pid>.<seq>.m<mseq>.heap. EFAULT when it cannot be written;
// ENOENT without opt.prof (jemalloc's answers).
int ctl_prof_dump(Req& r, const size_t*, size_t) {
  if (!kProf || !core::prof::enabled()) return ENOENT;
  if (r.oldp != nullptr || r.oldlenp != nullptr) return EPERM;
  const char* name = nullptr;
  bool written;
  if (int e = take_write(r, &name, &written)) return e;
  return core::prof::dump(name);
}

// Write-only, with an optional new lg_sample (at most 63).
int ctl_prof_reset(Req& r, const size_t*, size_t) {
  if (!kProf || !core::prof::enabled()) return ENOENT;
  if (r.oldp != nullptr || r.oldlenp != nullptr) return EPERM;
  size_t lg = core::prof::lg_sample();
  bool written;
  if (int e = take_write(r, &lg, &written)) return e;
  core::prof::reset(lg > 63 ? 63 : lg);
  return 0;
}

// 0 without opt.prof: jemalloc sets it when profiling starts.
int ctl_prof_lg_sample(Req& r, const size_t*, size_t) {
  if (!kProf) return ENOENT;
  return read_only(r, core::prof::enabled() ? core::prof::lg_sample() : size_t{0});
}

int ctl_config_debug(Req& r, const size_t*, size_t) { return read_only(r, kDebug); }
int ctl_config_hardened(Req& r, const size_t*, size_t) { return read_only(r, kHardened); }
int ctl_config_stats(Req& r, const size_t*, size_t) { return read_only(r, kStats); }
int ctl_config_prof(Req& r, const size_t*, size_t) { return read_only(r, kProf); }

// ---- the tree ----------------------------------------------------------
#define LEAF(n, f) Node{n, f, nullptr, 0, nullptr, nullptr}
#define INNER(n, a) Node{n, nullptr, a, sizeof a / sizeof a[0], nullptr, nullptr}
#define INDEXED(n, child, ok) Node{n, nullptr, nullptr, 0, &child, ok}

constexpr Node kStatsArenaI[] = {LEAF("pactive", ctl_arena_pactive), LEAF("pdirty", ctl_arena_pdirty)};
constexpr Node kStatsArenaIndexed = INNER(nullptr, kStatsArenaI);
constexpr Node kStatsKids[] = {
    LEAF("allocated", ctl_stats_allocated), LEAF("active", ctl_stats_active),
    LEAF("resident", ctl_stats_resident),   LEAF("mapped", ctl_stats_mapped),
    LEAF("retained", ctl_stats_retained),   LEAF("metadata", ctl_stats_metadata),
    INDEXED("arenas", kStatsArenaIndexed, arena_index_ok),
};
constexpr Node kThreadTcache[] = {LEAF("flush", ctl_purge), LEAF("enabled", ctl_thread_tcache_enabled)};
constexpr Node kThread[] = {
    LEAF("arena", ctl_thread_arena),
    LEAF("allocated", ctl_thread_counter<true>),
    LEAF("allocatedp", ctl_thread_counter_ptr<true>),
    LEAF("deallocated", ctl_thread_counter<false>),
    LEAF("deallocatedp", ctl_thread_counter_ptr<false>),
    INNER("tcache", kThreadTcache),
};
constexpr Node kArenaI[] = {LEAF("purge", ctl_purge), LEAF("decay", ctl_purge)};
constexpr Node kArenaIndexed = INNER(nullptr, kArenaI);
constexpr Node kTcache[] = {
    LEAF("create", ctl_tcache_create),
    LEAF("flush", ctl_tcache_flush<false>),
    LEAF("destroy", ctl_tcache_flush<true>),
};
constexpr Node kBinI[] = {LEAF("size", ctl_bin_size)};
constexpr Node kBinIndexed = INNER(nullptr, kBinI);
constexpr Node kLextentI[] = {LEAF("size", ctl_lextent_size)};
constexpr Node kLextentIndexed = INNER(nullptr, kLextentI);
constexpr Node kArenas[] = {
    LEAF("narenas", ctl_narenas),
    LEAF("create", ctl_arenas_create),
    LEAF("page", ctl_page),
    LEAF("dirty_decay_ms", ctl_arenas_dirty_decay_ms),
    LEAF("quantum", ctl_quantum),
    LEAF("nbins", ctl_nbins),
    INDEXED("bin", kBinIndexed, bin_index_ok),
    LEAF("nlextents", ctl_nlextents),
    INDEXED("lextent", kLextentIndexed, lextent_index_ok),
};
// Every option of the option table (core/options.cc), with its type, plus
// jemalloc's names for the same settings. api_test checks that every option
// in the table has a node here.
constexpr Node kOpt[] = {
    LEAF("decay_ms", ctl_opt_decay_ms),             // uint64_t, rw
    LEAF("thp", ctl_opt_thp),                       // const char *
    LEAF("huge_threshold", ctl_opt_huge_threshold), // size_t
    LEAF("tcache", ctl_opt_tcache),                 // bool
    LEAF("hardened", ctl_opt_hardened),             // bool
    LEAF("stats_print", ctl_opt_stats_print),       // bool
    LEAF("prefault", ctl_opt_prefault),             // bool
    LEAF("bin_sets", ctl_opt_bin_sets),             // size_t (0: one per CPU)
    LEAF("background_thread", ctl_opt_background_thread), // bool
    LEAF("prof", ctl_opt_prof),                     // bool
    LEAF("prof_active", ctl_opt_prof_active),       // bool
    LEAF("lg_prof_sample", ctl_opt_lg_prof_sample), // size_t
    LEAF("prof_prefix", ctl_opt_prof_prefix),       // const char *
    LEAF("prof_final", ctl_opt_prof_final),         // bool
    LEAF("prof_leak", ctl_opt_prof_leak),           // bool
    LEAF("lg_prof_interval", ctl_opt_lg_prof_interval), // ssize_t (-1: no interval dumps)
    LEAF("prof_gdump", ctl_opt_prof_gdump),         // bool
    LEAF("prof_signal", ctl_opt_prof_signal),       // int (0: none)
    LEAF("stats_print_opts", ctl_opt_stats_print_opts), // const char *
    LEAF("dirty_decay_ms", ctl_opt_dirty_decay_ms), // ssize_t, jemalloc's
    LEAF("narenas", ctl_opt_narenas),               // unsigned, jemalloc's
    LEAF("muzzy_decay_ms", ctl_opt_muzzy_decay_ms), // ssize_t, jemalloc's (0: no muzzy stage)
    LEAF("tcache_max", ctl_opt_tcache_max),         // size_t, jemalloc's
};
constexpr Node kConfig[] = {
    LEAF("debug", ctl_config_debug), LEAF("hardened", ctl_config_hardened), LEAF("stats", ctl_config_stats), LEAF("prof", ctl_config_prof)};
constexpr Node kProfKids[] = {
    LEAF("active", ctl_prof_active),
    LEAF("dump", ctl_prof_dump),
    LEAF("reset", ctl_prof_reset),
    LEAF("lg_sample", ctl_prof_lg_sample),
    LEAF("interval", ctl_prof_interval),
    LEAF("gdump", ctl_prof_gdump),
};
constexpr Node kGrowth[] = {
    LEAF("headroom", ctl_growth<0>), LEAF("neighbour", ctl_growth<1>), LEAF("fixed_map", ctl_growth<2>),
    LEAF("mremap", ctl_growth<3>),   LEAF("copy", ctl_growth<4>),
};
static_assert(sizeof kGrowth / sizeof kGrowth[0] == huge::kGrowthPaths, "a node for every growth path");
constexpr Node kHuge[] = {
    INNER("growth", kGrowth),          LEAF("allocs", ctl_huge_allocs), LEAF("frees", ctl_huge_frees),
    LEAF("shrinks", ctl_huge_shrinks), LEAF("active", ctl_huge_active), LEAF("spans", ctl_huge_spans),
    LEAF("allocated", ctl_huge_allocated),
};
constexpr Node kOs[] = {
    LEAF("mmap", ctl_os_calls<os::Call::kMmap>),
    LEAF("munmap", ctl_os_calls<os::Call::kMunmap>),
    LEAF("mprotect", ctl_os_calls<os::Call::kMprotect>),
    LEAF("mremap", ctl_os_calls<os::Call::kMremap>),
    LEAF("madvise", ctl_os_calls<os::Call::kMadvise>),
    LEAF("process_madvise", ctl_os_calls<os::Call::kProcessMadvise>),
    LEAF("pidfd_open", ctl_os_calls<os::Call::kPidfdOpen>),
    LEAF("purged_bytes", ctl_os_purged_bytes),
    LEAF("purged_ranges", ctl_os_purged_ranges),
};
static_assert(os::kCallKinds == 7, "a ductile.os node for every kind of system call");
constexpr Node kChunk[] = {
    LEAF("reserved", ctl_chunk_reserved), LEAF("reservations", ctl_chunk_reservations),
    LEAF("active", ctl_chunk_active),     LEAF("dirty", ctl_chunk_dirty),
    LEAF("clean", ctl_chunk_clean),       LEAF("allocs", ctl_chunk_allocs),
    LEAF("frees", ctl_chunk_frees),       LEAF("purges", ctl_chunk_purges),
    LEAF("purged_bytes", ctl_chunk_purged_bytes),
    LEAF("map_pages", ctl_chunk_map_pages), LEAF("map_released", ctl_chunk_map_released),
};
constexpr Node kSmall[] = {
    LEAF("allocated", ctl_small_allocated),   LEAF("active", ctl_small_active),
    LEAF("regions", ctl_small_regions),       LEAF("advised_regions", ctl_small_advised),
    LEAF("dense_regions", ctl_small_dense),   LEAF("region_dirty", ctl_small_region_dirty),
};
constexpr Node kPrefault[] = {
    LEAF("running", ctl_prefault_running),
    LEAF("starts", ctl_prefault_starts),
    LEAF("populated_bytes", ctl_prefault_bytes),
};
constexpr Node kMedium[] = {LEAF("allocated", ctl_medium_allocated)};
constexpr Node kMaps[] = {
    LEAF("limit", ctl_maps_limit),   LEAF("threshold", ctl_maps_threshold),
    LEAF("count", ctl_maps_count),   LEAF("counts", ctl_maps_counts),
    LEAF("tight", ctl_maps_tight),   LEAF("splits_avoided", ctl_maps_splits_avoided),
};
constexpr Node kDuctile[] = {
    INNER("huge", kHuge),     INNER("os", kOs),   INNER("chunk", kChunk),
    INNER("small", kSmall),   INNER("medium", kMedium), INNER("prefault", kPrefault),
    INNER("maps", kMaps),     LEAF("trim", ctl_trim),
};
constexpr Node kRootKids[] = {
    LEAF("version", ctl_version),
    LEAF("epoch", ctl_epoch),
    LEAF("background_thread", ctl_background_thread),
    LEAF("max_background_threads", ctl_max_background_threads),
    INNER("stats", kStatsKids),
    INNER("thread", kThread),
    INNER("tcache", kTcache),
    INDEXED("arena", kArenaIndexed, arena_index_ok),
    INNER("arenas", kArenas),
    INNER("opt", kOpt),
    INNER("config", kConfig),
    INNER("prof", kProfKids),
    INNER("ductile", kDuctile),
};
constexpr Node kRoot = INNER("", kRootKids);

#undef LEAF
#undef INNER
#undef INDEXED

// ---- lookup ------------------------------------------------------------
// One step down from `n` by the MIB component `c`; nullptr if there is none.
const Node* child(const Node* n, size_t c) {
  if (n->indexed != nullptr) return n->index_ok(c) ? n->indexed : nullptr;
  return c < n->nkids ? &n->kids[c] : nullptr;
}

// Translates up to *depth components of `name` into mib[]; *depth becomes
// the number translated and *whole says whether that was all of them.
// Returns the node reached, or nullptr (ENOENT).
const Node* lookup(const char* name, size_t* mib, size_t* depth, bool* whole) {
  const Node* n = &kRoot;
  size_t i = 0;
  const char* p = name;
  *whole = false;
  while (i < *depth) {
    const char* dot = std::strchr(p, '.');
    size_t len = dot ? static_cast<size_t>(dot - p) : std::strlen(p);
    if (len == 0 || len > kMaxComponent || n->ctl != nullptr) return nullptr;
    size_t c = SIZE_MAX;
    if (n->indexed != nullptr) {
      size_t v = 0;
      for (size_t k = 0; k < len; k++) {
        if (p[k] < '0' || p[k] > '9' || v > (SIZE_MAX - 9) / 10) return nullptr;
        v = v * 10 + static_cast<size_t>(p[k] - '0');
      }
      c = v;
    } else {
      for (size_t k = 0; k < n->nkids; k++)
        if (std::strlen(n->kids[k].name) == len && std::strncmp(n->kids[k].name, p, len) == 0) c = k;
    }
    const Node* next = c == SIZE_MAX ? nullptr : child(n, c);
    if (next == nullptr) return nullptr;
    mib[i++] = c;
    n = next;
    if (!dot) {
      *whole = true;
      break;
    }
    p = dot + 1;
  }
  *depth = i;
  return n;
}

bool ready() { return core::ensure_ready(); }

}  // namespace

extern "C" {

DUCTILE_EXPORT int ductile_mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp,
                                   size_t newlen) noexcept {
  if (name == nullptr) return EINVAL;
  if (!ready()) return EAGAIN;
  size_t mib[kMaxDepth];
  size_t depth = kMaxDepth;
  bool whole;
  const Node* n = lookup(name, mib, &depth, &whole);
  // A name that stops at an inner node, or goes on past the deepest one we
  // translate, is not a value.
  if (n == nullptr || n->ctl == nullptr || !whole) return ENOENT;
  Req r{oldp, oldlenp, newp, newlen};
  return n->ctl(r, mib, depth);
}

DUCTILE_EXPORT int ductile_mallctlnametomib(const char* name, size_t* mibp, size_t* miblenp) noexcept {
  if (name == nullptr || mibp == nullptr || miblenp == nullptr) return EINVAL;
  if (!ready()) return EAGAIN;
  size_t depth = *miblenp < kMaxDepth ? *miblenp : kMaxDepth;
  size_t mib[kMaxDepth];
  bool whole;
  if (lookup(name, mib, &depth, &whole) == nullptr) return ENOENT;
  std::memcpy(mibp, mib, depth * sizeof(size_t));
  *miblenp = depth;
  return 0;
}

DUCTILE_EXPORT int ductile_mallctlbymib(const size_t* mib, size_t miblen, void* oldp, size_t* oldlenp,
                                        void* newp, size_t newlen) noexcept {
  if (mib == nullptr) return EINVAL;
  if (!ready()) return EAGAIN;
  const Node* n = &kRoot;
  for (size_t i = 0; i < miblen; i++) {
    if (n->ctl != nullptr || (n = child(n, mib[i])) == nullptr) return ENOENT;
  }
  if (n->ctl == nullptr) return ENOENT;
  Req r{oldp, oldlenp, newp, newlen};
  return n->ctl(r, mib, miblen);
}

DUCTILE_EXPORT void ductile_malloc_stats_print(void (*write_cb)(void*, const char*), void* cbopaque,
                                               const char* opts) noexcept {
  core::print_stats(write_cb, cbopaque, opts);
}


int mallctl(const char*, void*, size_t*, void*, size_t) DUCTILE_JEMALLOC_ALIAS(mallctl);
int mallctlnametomib(const char*, size_t*, size_t*) DUCTILE_JEMALLOC_ALIAS(mallctlnametomib);
int mallctlbymib(const size_t*, size_t, void*, size_t*, void*, size_t) DUCTILE_JEMALLOC_ALIAS(mallctlbymib);
void malloc_stats_print(void (*)(void*, const char*), void*, const char*) DUCTILE_JEMALLOC_ALIAS(malloc_stats_print);

}  // extern "C"
