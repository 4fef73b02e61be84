// SPDX-License-Identifier: BSD-2-Clause
// The fork handlers (core/fork.h).
#include "core/fork.h"

#include "base/fork_gate.h"
#include "core/cache.h"
#include "core/collect.h"
#include "core/depot.h"
#include "core/fallback_heap.h"
#include "core/prof.h"
#include "core/stdio_fork.h"

namespace ductile::core {

using small::ThreadCache;

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
// (t_forking: core/state.h.)
__thread unsigned t_forks_taking_nothing __attribute__((tls_model("initial-exec"))) = 0;

}  // namespace

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
  depot_prefork();
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
  depot_postfork_parent();
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
  depot_postfork_child();
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
  forget_parked();
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

}  // namespace ductile::core
