// SPDX-License-Identifier: BSD-2-Clause
// The background thread (core/background.h): its start, its sleep and
// wake-up, and the decay steps it runs.
#include "core/background.h"

#include <time.h>

#include "base/thread.h"

namespace ductile::core {

namespace {
// The thread only makes system calls through the layers: a small stack is
// plenty (and costs little address space under RLIMIT_AS).
constexpr size_t kStack = 64 * 1024;

uint64_t period_for(uint64_t decay_ns) {
  constexpr uint64_t kMin = 10'000'000, kMax = 60'000'000'000;
  const uint64_t p = decay_ns / 4;
  return p < kMin ? kMin : p > kMax ? kMax : p;
}
}  // namespace

void BackgroundThread::init_cond() noexcept {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&wake_, &a);
  pthread_condattr_destroy(&a);
}

void BackgroundThread::set_decay(uint64_t decay_ns) noexcept {
  LockGuard g(lock_);
  period_ns_ = period_for(decay_ns);
}

void BackgroundThread::init(bool enabled, uint64_t decay_ns, Step step, Arm arm) noexcept {
  enabled_ = enabled && step != nullptr && arm != nullptr;
  period_ns_ = period_for(decay_ns);
  step_ = step;
  arm_ = arm;
  init_cond();
  unstarted_.store(enabled_, std::memory_order_relaxed);
  if (enabled_) arm_();
}

void BackgroundThread::wake() noexcept {
  {
    LockGuard g(lock_);
    if (!enabled_ || state_ == kStopped || state_ == kFailed) return;
    rung_ = true;
    if (state_ == kRunning) {
      stats_.wakeups++;
      pthread_cond_signal(&wake_);
      return;
    }
    state_ = kRunning;  // claimed: a second caller sees kRunning and only signals
    unstarted_.store(false, std::memory_order_relaxed);
    publish_running();
  }
  pthread_t t;
  const int rc = start_helper_thread(&t, &BackgroundThread::main_thunk, this, kStack);
  LockGuard g(lock_);
  if (rc != 0) {
    state_ = kFailed;  // decay goes on from the allocator's own calls
    publish_running();
    return;
  }
  thread_ = t;
  publish_running();
  stats_.starts++;
  if (state_ == kStopped) {
    // stop() ran meanwhile and could not join a thread it did not know.
    pthread_cond_signal(&wake_);
    lock_.unlock();
    pthread_join(t, nullptr);
    lock_.lock();
    thread_ = pthread_t{};
    publish_running();
  }
}

void* BackgroundThread::main_thunk(void* self) noexcept {
  pthread_setname_np(pthread_self(), "ductile-bg");
  static_cast<BackgroundThread*>(self)->run();
  return nullptr;
}

void BackgroundThread::run() noexcept {
  LockGuard g(lock_);
  bool busy = true;  // started by the doorbell: there is work
  while (state_ == kRunning) {
    if (busy) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      uint64_t ns = static_cast<uint64_t>(ts.tv_nsec) + period_ns_;
      ts.tv_sec += static_cast<time_t>(ns / 1000000000u);
      ts.tv_nsec = static_cast<long>(ns % 1000000000u);
      while (state_ == kRunning && pthread_cond_timedwait(&wake_, lock_.native(), &ts) == 0) {
      }
    } else {
      while (state_ == kRunning && !rung_) pthread_cond_wait(&wake_, lock_.native());
    }
    if (state_ != kRunning) break;
    rung_ = false;
    stats_.steps++;
    lock_.unlock();
    busy = step_();
    if (!busy) arm_();  // sleep until the doorbell rings again
    lock_.lock();
    if (!busy && rung_) busy = true;  // it rang while we stepped
  }
}

void BackgroundThread::stop() noexcept {
  pthread_t t{};
  bool join = false;
  {
    LockGuard g(lock_);
    if (state_ == kRunning && !pthread_equal(thread_, pthread_t{})) {
      join = true;
      t = thread_;
    }
    if (state_ != kFailed) state_ = kStopped;
    unstarted_.store(false, std::memory_order_relaxed);
    publish_running();
    pthread_cond_broadcast(&wake_);
  }
  if (join) pthread_join(t, nullptr);
  LockGuard g(lock_);
  thread_ = pthread_t{};
  publish_running();
}

BackgroundStats BackgroundThread::stats() const noexcept {
  BackgroundStats s;
  s.starts = stats_.starts;
  s.wakeups = stats_.wakeups;
  s.steps = stats_.steps;
  s.running = stats_.running;
  return s;
}

void BackgroundThread::postfork_child() noexcept {
  // The thread did not come along. The child's doorbell starts its own.
  lock_.reinit_after_fork();
  init_cond();
  thread_ = pthread_t{};
  rung_ = false;
  if (state_ == kRunning) state_ = kIdle;
  unstarted_.store(enabled_ && state_ == kIdle, std::memory_order_relaxed);
  publish_running();
  if (enabled_ && state_ == kIdle) arm_();
}

}  // namespace ductile::core
