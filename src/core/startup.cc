// SPDX-License-Identifier: BSD-2-Clause
// Making the runtime on the first call, and stopping its threads at exit
// (core/startup.h).
#include "core/startup.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/auxv.h>

#include <cstring>
#include <new>

#include "core/cache.h"
#include "core/collect.h"
#include "core/fork.h"
#include "core/growth.h"
#include "core/prof.h"
#include "core/state.h"
#include "core/stats.h"

namespace ductile::core {

__attribute__((weak)) os::Kernel& runtime_kernel() noexcept { return os::linux_kernel(); }
namespace {
void prof_at_exit() { prof::at_exit(); }
void growth_at_exit() { growth::at_exit(); }
}  // namespace

Runtime::Runtime(const Options& o) noexcept
    : opts(o),
      os(runtime_kernel()),
      // Declared before the chunk layer (see Runtime): it keeps the reference.
      huge(chunks,
           [&] {
             huge::Options h;
             h.threshold = o.huge_threshold;
             h.thp = o.thp;
             h.guard = g_hardened;
             return h;
           }()),
      chunks(os, clock,
             [&] {
               chunk::Options c;
               c.decay_ns = o.decay_ms * 1000000u;
               c.storage_zeroed = true;  // g_runtime is static storage, constructed once
               return c;
             }()) {
  prof::init(o);
  growth::init(o);
  prefault.init(&os, o.prefault);
  // decay_ms:0 purges on free: nothing is left for a background thread.
  background.init(o.background_thread && o.decay_ms != 0, o.decay_ms * 1000000u, &background_step,
                  &background_arm);
  small::ArenaOptions a;
  a.thp = o.thp != huge::ThpPolicy::kNever;
  // The dense space where the kernel's THP mode turns out to be madvise
  // (the arena asks, as growing_medium() does, at its first use).
  a.busy_space = o.thp != huge::ThpPolicy::kNever ? chunk::Space::kDense : chunk::Space::kPlain;
  // Advised once the process holds Runtime::kDenseAdviceAt (alloc.cc), or
  // once the slab arena takes its regions there (region.cc).
  if (a.busy_space == chunk::Space::kDense) chunks.set_dense_advice(false);
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
    for (size_t c = 0; c < small::kNumSmall; c++) {
      new (&bins[a][c]) small::Bin();
      bins[a][c].init(c, &arena, g_hardened);
    }
  decay.init(&bins[0][0], nbinsets * small::kNumSmall, &arena);
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
      uint64_t seed = 0;
      if (auto* bytes = reinterpret_cast<const unsigned char*>(getauxval(AT_RANDOM)))
        std::memcpy(&seed, bytes + 8, sizeof seed);
      small::set_freed_key(seed);
    }
    new (g_runtime) Runtime(o);
    pthread_key_create(&g_cache_key, thread_exit);
    pthread_atfork(prefork, postfork_parent, postfork_child);
    if (o.stats_print) print_stats_at_exit_on();
    if (kProf && o.prof && o.prof_final) atexit(prof_at_exit);
    if (kProf && o.growth_prof) atexit(growth_at_exit);
    g_huge_threshold = rt().huge.options().threshold;
    g_ready.store(true, std::memory_order_release);
  }
  g_init_lock.unlock();
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  t_initialising = false;
  return true;
}

namespace {

// The prefault helper is stopped and joined when the process exits normally.
__attribute__((destructor)) void stop_helper_at_exit() {
  if (!g_ready.load(std::memory_order_acquire)) return;
  rt().prefault.stop();
  rt().background.stop();
}

}  // namespace

}  // namespace ductile::core
