// SPDX-License-Identifier: BSD-2-Clause
// ductile's locks (base/lock.h): each spins a little before it sleeps, also as a forked child
// re-creates it.
#include <pthread.h>

#include <gtest/gtest.h>

#include "base/lock.h"

// ductile's locks guard short sections that two threads often want at once
// (the chunk layer's, a bin's): each spins a little before it sleeps in the
// kernel, and so does the lock a forked child re-creates. (A plain mutex
// slept and woke on every collision: short-threads spent a third of its
// time in futex calls.) glibc keeps the kind in the mutex itself.
TEST(BaseLock, SpinsBeforeItSleepsAlsoAfterFork) {
  static ductile::Mutex m;  // statically initialised, as ductile's are
  EXPECT_EQ(m.native()->__data.__kind, PTHREAD_MUTEX_ADAPTIVE_NP);
  m.lock();
  m.reinit_after_fork();  // as in a child: the parent's state is dropped
  EXPECT_EQ(m.native()->__data.__kind, PTHREAD_MUTEX_ADAPTIVE_NP);
  EXPECT_TRUE(m.try_lock());
  m.unlock();
  EXPECT_EQ(ductile::t_locks_held, 1u);  // the lock() before the re-creation
  ductile::t_locks_held = 0;
}
