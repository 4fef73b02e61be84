// SPDX-License-Identifier: BSD-2-Clause
// mallctl's leaves: the handler of each name, which reads or writes one
// value by jemalloc's rules (mallctl_leaves.h); the tree is in mallctl.cc.
#include <errno.h>
#include <sys/types.h>

#include <atomic>
#include <climits>
#include <cstring>

#include "api/mallctl_leaves.h"
#include "base/lock.h"
#include "core/options.h"
#include "core/prof.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"

using namespace ductile;
using core::StatsSnapshot;

namespace ductile::ctl {

namespace {

// The one arena's index, and jemalloc's index for "all arenas".
constexpr size_t kArenasAll = MALLCTL_ARENAS_ALL;

StatsSnapshot& snapshot(StatsSnapshot& s) {
  core::take_snapshot(s);
  return s;
}

// ---- leaves ------------------------------------------------------------
std::atomic<uint64_t> g_epoch{1};

}  // namespace

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

template <os::Call C>
int ctl_os_calls(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().os.counters().get(C));
}
template int ctl_os_calls<os::Call::kMmap>(Req&, const size_t*, size_t);
template int ctl_os_calls<os::Call::kMunmap>(Req&, const size_t*, size_t);
template int ctl_os_calls<os::Call::kMprotect>(Req&, const size_t*, size_t);
template int ctl_os_calls<os::Call::kMremap>(Req&, const size_t*, size_t);
template int ctl_os_calls<os::Call::kMadvise>(Req&, const size_t*, size_t);
template int ctl_os_calls<os::Call::kProcessMadvise>(Req&, const size_t*, size_t);
template int ctl_os_calls<os::Call::kPidfdOpen>(Req&, const size_t*, size_t);
int ctl_os_purged_bytes(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().os.counters().purged_bytes.load(std::memory_order_relaxed));
}
int ctl_os_purged_ranges(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().os.counters().purged_ranges.load(std::memory_order_relaxed));
}

// The mapping budget near vm.max_map_count (os/map_budget.h).
int ctl_maps_limit(Req& r, const size_t*, size_t) { return read_only(r, core::rt().os.map_limit()); }
int ctl_maps_threshold(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().os.map_threshold());
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
namespace {
__thread uint64_t t_no_counter __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

template <bool Allocated>
int ctl_thread_counter(Req& r, const size_t*, size_t) {
  if (!kStats) return ENOENT;
  small::ThreadCache* tc = core::own_cache();
  uint64_t v = tc == nullptr ? 0 : Allocated ? tc->allocated : tc->deallocated;
  return read_only(r, v);
}
template int ctl_thread_counter<true>(Req&, const size_t*, size_t);
template int ctl_thread_counter<false>(Req&, const size_t*, size_t);

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
template int ctl_thread_counter_ptr<true>(Req&, const size_t*, size_t);
template int ctl_thread_counter_ptr<false>(Req&, const size_t*, size_t);

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
namespace {
constexpr unsigned kMaxArenas = 4095;
std::atomic<unsigned> g_narenas{1};
__thread unsigned t_arena __attribute__((tls_model("initial-exec"))) = 0;  // thread.arena
}  // namespace

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
namespace {
constexpr unsigned kMaxTcaches = 4094;
std::atomic<uint64_t> g_tcaches[(kMaxTcaches + 63) / 64];  // bit set: created, not destroyed
}  // namespace

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
template int ctl_tcache_flush<false>(Req&, const size_t*, size_t);
template int ctl_tcache_flush<true>(Req&, const size_t*, size_t);
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
namespace {
size_t nlextents() {
  const size_t threshold = __atomic_load_n(&core::g_huge_threshold, __ATOMIC_RELAXED);
  return small::class_of(threshold - 1) + 1 - small::kNumSmall;
}
}  // namespace
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

namespace {

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

}  // namespace

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
int ctl_opt_freed_fill(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.freed_fill); }
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

namespace {

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

}  // namespace

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

}  // namespace ductile::ctl
