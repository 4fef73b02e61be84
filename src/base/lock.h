/* SPDX-License-Identifier: BSD-2-Clause */
// A mutex that never allocates and is usable before constructors run
// (statically initialised), plus a scoped guard. It is glibc's adaptive
// kind: it spins a little before it sleeps in the kernel, as the sections
// it guards are short and two threads often want one at once (a plain
// mutex slept and woke on every collision).
#pragma once

#include <pthread.h>

namespace ductile {

// How many of ductile's locks the calling thread holds (every Mutex below
// counts itself): fork's handlers ask it, so that a fork from a signal
// handler that interrupted this thread inside the allocator does not wait
// for a lock the interrupted code holds.
extern __thread unsigned t_locks_held __attribute__((tls_model("initial-exec")));

class Mutex {
 public:
  constexpr Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // The count covers the whole call: up before the lock is asked for, down
  // after it is given back, so that a signal handler never sees a lock of
  // this thread's that the count leaves out (it may see one too many).
  void lock() noexcept {
    t_locks_held++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pthread_mutex_lock(&m_);
  }
  void unlock() noexcept {
    pthread_mutex_unlock(&m_);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_locks_held--;
  }
  bool try_lock() noexcept {
    t_locks_held++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (pthread_mutex_trylock(&m_) == 0) return true;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_locks_held--;
    return false;
  }
  // After fork() the child holds the parent's lock state; the fork handler
  // re-creates the lock in the child instead of unlocking a lock another
  // (now vanished) thread may own; of the same kind.
  void reinit_after_fork() noexcept {
    pthread_mutex_t fresh = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
    m_ = fresh;
  }
  // For pthread_cond_wait.
  pthread_mutex_t* native() noexcept { return &m_; }

 private:
  pthread_mutex_t m_ = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
};

class LockGuard {
 public:
  explicit LockGuard(Mutex& m) noexcept : m_(m) { m_.lock(); }
  ~LockGuard() { m_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Mutex& m_;
};

}  // namespace ductile
