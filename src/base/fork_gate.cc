// SPDX-License-Identifier: BSD-2-Clause
// The fork gate (base/fork_gate.h): entering and leaving it, and the fork
// that closes it and waits for the work in flight, on a futex.
#include "base/fork_gate.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "base/common.h"
#include "base/lock.h"

namespace ductile {

__thread unsigned t_locks_held __attribute__((tls_model("initial-exec"))) = 0;

namespace {

// ints, so that waiters sleep on them with futex(2): the machine may have
// fewer cores than busy threads, and spinning would steal the time of the
// very work that is being waited for.
std::atomic<int> g_active{0};  // threads inside the gate (outermost entries)
std::atomic<int> g_closed{0};  // a fork is in progress
__thread unsigned t_depth __attribute__((tls_model("initial-exec"))) = 0;

int* word(std::atomic<int>& a) { return reinterpret_cast<int*>(&a); }
void wait_while(std::atomic<int>& a, int v) {
  const KeepErrno keep;  // EAGAIN (the value moved) or EINTR: no error of the caller's
  (void)syscall(SYS_futex, word(a), FUTEX_WAIT_PRIVATE, v, nullptr, nullptr, 0);
}
void wake(std::atomic<int>& a, int n) {
  const KeepErrno keep;
  (void)syscall(SYS_futex, word(a), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

// One fewer inside; the last one out wakes a fork waiting in close().
void depart() {
  if (g_active.fetch_sub(1, std::memory_order_seq_cst) == 1 && g_closed.load(std::memory_order_seq_cst))
    wake(g_active, 1);
}

}  // namespace

bool ForkGate::try_enter() noexcept {
  if (t_depth != 0) {  // nested: the outer entry holds the gate open
    t_depth++;
    return true;
  }
  // Sequentially consistent on both sides (Dekker): either close() sees this
  // entry and waits for it, or this sees the gate closed and backs out.
  // t_depth covers the count in g_active (set before, cleared after), so
  // that a fork from a signal handler on this thread knows it is inside.
  t_depth = 1;
  g_active.fetch_add(1, std::memory_order_seq_cst);
  if (g_closed.load(std::memory_order_seq_cst)) {
    depart();
    t_depth = 0;
    return false;
  }
  return true;
}

void ForkGate::enter() noexcept {
  while (!try_enter()) wait_while(g_closed, 1);
}

void ForkGate::leave() noexcept {
  if (t_depth == 1) depart();  // before the depth goes: see try_enter
  t_depth--;
}

void ForkGate::close() noexcept {
  g_closed.store(1, std::memory_order_seq_cst);
  for (int n; (n = g_active.load(std::memory_order_seq_cst)) != 0;) wait_while(g_active, n);
}

void ForkGate::open() noexcept {
  g_closed.store(0, std::memory_order_seq_cst);
  wake(g_closed, INT_MAX);
}

bool ForkGate::inside() noexcept { return t_depth != 0; }

void ForkGate::reset_in_child() noexcept {
  // Only the forking thread exists. It was not inside (close() waited),
  // unless the fork came from a signal handler that interrupted it there
  // (see core's prefork): then its entry is the one left, and its leave()
  // comes when the handler returns.
  g_active.store(t_depth != 0 ? 1 : 0, std::memory_order_relaxed);
  g_closed.store(0, std::memory_order_relaxed);
}

}  // namespace ductile
