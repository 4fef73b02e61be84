/* SPDX-License-Identifier: BSD-2-Clause */
// The background thread (jemalloc's name: background_thread): finishes decay
// for a program that has gone quiet. Decay is otherwise driven by the
// allocator's own calls, so memory freed just before a program stops calling
// it stayed resident for good.
//
// It does not exist until it has work: the chunk layer's doorbell (arm /
// take_signal) rings once enough memory awaits decay, and the runtime starts
// the thread from a slow path that holds no lock (pthread_create allocates).
// Awake, it runs one decay step every quarter of the decay time until
// nothing awaits decay, then re-arms the doorbell and sleeps without a
// timeout. It blocks every signal, never allocates, is stopped and joined at
// exit, and does not survive fork(): the child starts its own when its
// doorbell rings.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/counter.h"
#include "base/lock.h"

namespace ductile::core {

struct BackgroundStats {
  uint64_t starts = 0;  // threads started (one, or one more per forked child)
  uint64_t wakeups = 0; // times the doorbell woke an idle thread
  uint64_t steps = 0;   // decay steps run
  bool running = false;
};

class BackgroundThread {
 public:
  // One decay step; returns true while something still awaits decay.
  using Step = bool (*)() noexcept;
  // Re-arms the doorbell before the thread sleeps without a timeout.
  using Arm = void (*)() noexcept;

  BackgroundThread() = default;
  BackgroundThread(const BackgroundThread&) = delete;
  BackgroundThread& operator=(const BackgroundThread&) = delete;

  // `decay_ns`: the decay time; awake, the thread steps four times per
  // decay time (as the free path checks), at most every 10 ms and at least
  // every minute.
  void init(bool enabled, uint64_t decay_ns, Step step, Arm arm) noexcept;
  // The decay time changed (mallctl).
  void set_decay(uint64_t decay_ns) noexcept;
  bool enabled() const noexcept { return enabled_; }
  // Enabled, and no thread made yet (none tried): the next wake() makes it.
  bool unstarted() const noexcept { return unstarted_.load(std::memory_order_relaxed); }

  // The doorbell rang: start the thread, or wake it. Call with no lock of
  // the allocator held.
  void wake() noexcept;
  // Stops and joins the thread; later wakes do nothing. Idempotent.
  void stop() noexcept;

  BackgroundStats stats() const noexcept;  // without the lock

  void prefork() noexcept { lock_.lock(); }
  void postfork_parent() noexcept { lock_.unlock(); }
  void postfork_child() noexcept;

 private:
  enum State : uint8_t { kIdle, kRunning, kStopped, kFailed };
  static void* main_thunk(void* self) noexcept;
  void run() noexcept;
  void init_cond() noexcept;

  bool enabled_ = false;
  uint64_t period_ns_ = 0;
  Step step_ = nullptr;
  Arm arm_ = nullptr;
  Mutex lock_;
  pthread_cond_t wake_;  // CLOCK_MONOTONIC: timed waits ignore clock changes
  pthread_t thread_{};
  State state_ = kIdle;
  bool rung_ = false;  // a wake() the thread has not seen yet
  std::atomic<bool> unstarted_{false};  // enabled_ while state_ is kIdle
  // BackgroundStats's figures, kept under the lock and read without it
  // (stats()): a wake() never waits for a statistics read.
  struct Counters {
    LockedCounter<uint64_t> starts;
    LockedCounter<uint64_t> wakeups;
    LockedCounter<uint64_t> steps;
    LockedCounter<bool> running;  // state_ is kRunning with a thread: set by publish_running()
  };
  Counters stats_;
  // After state_ or thread_ changed (lock held).
  void publish_running() noexcept { stats_.running.store(state_ == kRunning && !pthread_equal(thread_, pthread_t{})); }
};

}  // namespace ductile::core
