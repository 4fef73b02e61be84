/* SPDX-License-Identifier: BSD-2-Clause */
// A mutex that never allocates and is usable before constructors run
// (statically initialised), plus a scoped guard.
#pragma once

#include <pthread.h>

namespace ductile {

class Mutex {
 public:
  constexpr Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() noexcept { pthread_mutex_lock(&m_); }
  void unlock() noexcept { pthread_mutex_unlock(&m_); }
  bool try_lock() noexcept { return pthread_mutex_trylock(&m_) == 0; }
  // After fork() the child holds the parent's lock state; the fork handler
  // re-creates the lock in the child instead of unlocking a lock another
  // (now vanished) thread may own.
  void reinit_after_fork() noexcept { pthread_mutex_init(&m_, nullptr); }
  // For pthread_cond_wait.
  pthread_mutex_t* native() noexcept { return &m_; }

 private:
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
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
