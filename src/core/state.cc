// SPDX-License-Identifier: BSD-2-Clause
// The process's and the calling thread's state (core/state.h), and what the
// Runtime answers of itself.
#include "core/state.h"

#include "base/fork_gate.h"

namespace ductile::core {

DUCTILE_LARGE_STATIC alignas(kPage) unsigned char g_runtime[sizeof(Runtime)];
static_assert(alignof(Runtime) <= kPage);
std::atomic<bool> g_ready{false};
size_t g_huge_threshold = 0;
bool g_hardened = false;
alignas(small::ThreadCache) const unsigned char g_no_cache[sizeof(small::ThreadCache)] = {};
__thread small::ThreadCache* t_cache __attribute__((tls_model("initial-exec"))) =
    reinterpret_cast<small::ThreadCache*>(const_cast<unsigned char*>(g_no_cache));

Mutex g_init_lock;

// ---- thread state (each one's meaning: core/state.h) -------------------
__thread uint8_t t_state __attribute__((tls_model("initial-exec"))) = kNoCache;
__thread bool t_initialising __attribute__((tls_model("initial-exec"))) = false;
__thread bool t_freed_uncached __attribute__((tls_model("initial-exec"))) = false;
__thread bool t_cache_off __attribute__((tls_model("initial-exec"))) = false;
__thread unsigned t_calls __attribute__((tls_model("initial-exec"))) = 0;
__thread bool t_forking __attribute__((tls_model("initial-exec"))) = false;

bool inside_allocator() noexcept { return t_forking || t_calls != 0 || t_locks_held != 0 || ForkGate::inside(); }

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

bool inside_allocator_now() noexcept { return inside_allocator(); }

}  // namespace ductile::core
