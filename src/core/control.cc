// SPDX-License-Identifier: BSD-2-Clause
// Run-time control of the caches, trim and the huge threshold
// (core/control.h).
#include "core/control.h"

#include <pthread.h>

#include <cstring>

#include "core/cache.h"
#include "core/depot.h"
#include "core/fallback_heap.h"
#include "core/startup.h"

namespace ductile::core {

using small::ThreadCache;

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
  (void)retire_parked(true);
  (void)depot_step(true);
  rt().for_each_bin([](small::Bin& b) { b.trim(); });
  size_t bytes = rt().arena.trim();
  return bytes + rt().chunks.trim();
}

}  // namespace ductile::core
