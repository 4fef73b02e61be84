/* SPDX-License-Identifier: BSD-2-Clause */
// The prefault helper: an optional background thread that faults in the
// next stretch of a busy slab region with MADV_POPULATE_WRITE, so the thread
// that carves the region finds its pages present instead of taking a page
// fault on each one.
//
// Nothing starts until a region has proven busy: request() only queues (it
// may be called with other locks held, and must not create a thread there,
// since pthread_create allocates); the runtime calls start() from a point
// that holds no lock once start_pending() says so. A program that never
// carves past a region's prefix never gets the thread. The helper blocks
// every signal, never allocates, and is stopped and joined at exit; after
// fork() the child has no helper (the thread did not survive) and starts a
// fresh one when it needs one.
//
// Requests are hints: the queue is bounded and a full queue drops them, and a
// range that is no longer mapped just fails to populate.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/counter.h"
#include "base/lock.h"
#include "os/os.h"

namespace ductile::small {

struct PrefaultStats {
  uint64_t starts = 0;     // threads started (one, or one more per forked child)
  uint64_t requests = 0;   // ranges queued
  uint64_t dropped = 0;    // ranges not queued: queue full, stopped, or disabled
  uint64_t populated = 0;  // ranges the kernel populated
  uint64_t bytes = 0;      // bytes of those
  bool running = false;
};

class Prefaulter {
 public:
  static constexpr size_t kQueue = 32;

  Prefaulter() = default;
  Prefaulter(const Prefaulter&) = delete;
  Prefaulter& operator=(const Prefaulter&) = delete;
  ~Prefaulter() { stop(); }

  // `enabled` false: every request is dropped and no thread ever starts.
  void init(os::Os* os, bool enabled) noexcept;
  bool enabled() const noexcept { return enabled_; }

  // Queues [addr, addr + size) to be faulted in. Never blocks on the helper,
  // never allocates; the first request asks for the thread to be started.
  void request(void* addr, size_t size) noexcept;
  // Whether a request is waiting for start(): one relaxed load, for the slow path.
  bool start_pending() const noexcept { return pending_start_.load(std::memory_order_relaxed); }
  // Starts the helper if a request asked for it. Call with no lock of the
  // allocator held (pthread_create allocates). False if the thread could not
  // be created (requests are dropped from then on).
  bool start() noexcept;
  // Stops and joins the helper; later requests are dropped. Idempotent.
  void stop() noexcept;
  // Waits until the queue is empty and the helper idle (tests; stats printing).
  void drain() noexcept;

  PrefaultStats stats() const noexcept;  // without the lock

  void prefork() noexcept;
  void postfork_parent() noexcept;
  void postfork_child() noexcept;

 private:
  enum State : uint8_t { kIdle, kRunning, kStopped, kFailed };
  static void* main_thunk(void* self) noexcept;
  void run() noexcept;

  os::Os* os_ = nullptr;
  bool enabled_ = false;
  std::atomic<bool> pending_start_{false};
  Mutex lock_;
  pthread_cond_t wake_ = PTHREAD_COND_INITIALIZER;   // the helper waits for work
  pthread_cond_t idle_ = PTHREAD_COND_INITIALIZER;   // drain() waits for an empty queue
  pthread_t thread_{};
  State state_ = kIdle;
  bool busy_ = false;  // the helper is populating a range it took
  os::Range queue_[kQueue] = {};
  size_t head_ = 0;
  size_t count_ = 0;
  // PrefaultStats's figures, kept under the lock and read without it
  // (stats()): a request never waits for a statistics read.
  struct Counters {
    LockedCounter<uint64_t> starts;
    LockedCounter<uint64_t> requests;
    LockedCounter<uint64_t> dropped;
    LockedCounter<uint64_t> populated;
    LockedCounter<uint64_t> bytes;
    LockedCounter<bool> running;  // state_ is kRunning with a thread: set by publish_running()
  };
  Counters stats_;
  // After state_ or thread_ changed (lock held).
  void publish_running() noexcept { stats_.running.store(state_ == kRunning && !pthread_equal(thread_, pthread_t{})); }
};

}  // namespace ductile::small
