// SPDX-License-Identifier: BSD-2-Clause
// The prefault helper thread (small/prefaulter.h): its queue, start, run
// and stop.
#include "small/prefaulter.h"

#include "base/thread.h"

namespace ductile::small {

namespace {
// The helper only makes system calls: a small stack is plenty.
constexpr size_t kHelperStack = 64 * 1024;
}  // namespace

void Prefaulter::init(os::Os* os, bool enabled) noexcept {
  os_ = os;
  enabled_ = enabled && os != nullptr;
}

void Prefaulter::request(void* addr, size_t size) noexcept {
  if (size == 0) return;
  LockGuard g(lock_);
  if (!enabled_ || state_ == kStopped || state_ == kFailed || count_ == kQueue) {
    stats_.dropped++;
    return;
  }
  queue_[(head_ + count_) % kQueue] = {addr, size};
  count_++;
  stats_.requests++;
  if (state_ == kRunning) pthread_cond_signal(&wake_);
  else pending_start_.store(true, std::memory_order_relaxed);
}

bool Prefaulter::start() noexcept {
  {
    LockGuard g(lock_);
    if (state_ != kIdle || !pending_start_.load(std::memory_order_relaxed)) return state_ != kFailed;
    // Claimed: a second caller sees kRunning and leaves it to us.
    state_ = kRunning;
    publish_running();
    pending_start_.store(false, std::memory_order_relaxed);
  }
  pthread_t t;
  const int rc = start_helper_thread(&t, &Prefaulter::main_thunk, this, kHelperStack);
  LockGuard g(lock_);
  if (rc != 0) {
    state_ = kFailed;
    publish_running();
    stats_.dropped += count_;
    count_ = 0;
    pthread_cond_broadcast(&idle_);
    return false;
  }
  thread_ = t;
  publish_running();
  stats_.starts++;
  if (state_ == kStopped) {
    // stop() ran while we were creating it: it could not join what it did not
    // know yet. The helper sees kStopped and returns at once.
    pthread_cond_signal(&wake_);
    lock_.unlock();
    pthread_join(t, nullptr);
    lock_.lock();
    return false;
  }
  pthread_cond_signal(&wake_);
  return true;
}

void* Prefaulter::main_thunk(void* self) noexcept {
  pthread_setname_np(pthread_self(), "ductile-pf");
  static_cast<Prefaulter*>(self)->run();
  return nullptr;
}

void Prefaulter::run() noexcept {
  LockGuard g(lock_);
  for (;;) {
    while (count_ == 0 && state_ == kRunning) pthread_cond_wait(&wake_, lock_.native());
    if (state_ != kRunning) break;
    os::Range r = queue_[head_];
    head_ = (head_ + 1) % kQueue;
    count_--;
    busy_ = true;
    lock_.unlock();
    bool ok = os_->populate(r.addr, r.size);
    lock_.lock();
    busy_ = false;
    if (ok) {
      stats_.populated++;
      stats_.bytes += r.size;
    }
    if (count_ == 0) pthread_cond_broadcast(&idle_);
  }
  busy_ = false;
  pthread_cond_broadcast(&idle_);
}

void Prefaulter::stop() noexcept {
  pthread_t t{};
  bool join = false;
  {
    LockGuard g(lock_);
    if (state_ == kRunning) {
      join = stats_.starts != 0 && !pthread_equal(thread_, pthread_t{});
      t = thread_;
    }
    if (state_ != kFailed) state_ = kStopped;
    publish_running();
    pending_start_.store(false, std::memory_order_relaxed);
    stats_.dropped += count_;
    count_ = 0;
    pthread_cond_broadcast(&wake_);
    pthread_cond_broadcast(&idle_);
  }
  if (join) pthread_join(t, nullptr);
  LockGuard g(lock_);
  thread_ = pthread_t{};
  publish_running();
}

void Prefaulter::drain() noexcept {
  LockGuard g(lock_);
  while (state_ == kRunning && (count_ != 0 || busy_)) pthread_cond_wait(&idle_, lock_.native());
}

PrefaultStats Prefaulter::stats() const noexcept {
  PrefaultStats s;
  s.starts = stats_.starts;
  s.requests = stats_.requests;
  s.dropped = stats_.dropped;
  s.populated = stats_.populated;
  s.bytes = stats_.bytes;
  s.running = stats_.running;
  return s;
}

void Prefaulter::prefork() noexcept { lock_.lock(); }
void Prefaulter::postfork_parent() noexcept { lock_.unlock(); }

void Prefaulter::postfork_child() noexcept {
  // The helper did not come along: forget it. The queue's ranges belong to
  // the child's copy of the address space too, so they stay; the child starts
  // its own helper on its next slow path if anything is queued.
  lock_.reinit_after_fork();
  pthread_cond_init(&wake_, nullptr);
  pthread_cond_init(&idle_, nullptr);
  thread_ = pthread_t{};
  busy_ = false;
  if (state_ == kRunning) state_ = kIdle;
  publish_running();
  pending_start_.store(state_ == kIdle && count_ != 0, std::memory_order_relaxed);
}

}  // namespace ductile::small
