#include "small/prefaulter.h"

#include <signal.h>

namespace ductile::small {

namespace {
// The helper only makes system calls: a small stack is plenty.
constexpr size_t kHelperStack = 64 * 1024;

struct Locked {
  explicit Locked(pthread_mutex_t& m) noexcept : m_(m) { pthread_mutex_lock(&m_); }
  ~Locked() { pthread_mutex_unlock(&m_); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
  pthread_mutex_t& m_;
};
}  // namespace

void Prefaulter::init(os::Os* os, bool enabled) noexcept {
  os_ = os;
  enabled_ = enabled && os != nullptr;
}

void Prefaulter::request(void* addr, size_t size) noexcept {
  if (size == 0) return;
  Locked g(lock_);
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
    Locked g(lock_);
    if (state_ != kIdle || !pending_start_.load(std::memory_order_relaxed)) return state_ != kFailed;
    // Claimed: a second caller sees kRunning and leaves it to us.
    state_ = kRunning;
    pending_start_.store(false, std::memory_order_relaxed);
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kHelperStack);
  // The helper inherits a mask that blocks every signal: no handler of the
  // program ever runs on it.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  int rc = pthread_create(&t, &attr, &Prefaulter::main_thunk, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  Locked g(lock_);
  if (rc != 0) {
    state_ = kFailed;
    stats_.dropped += count_;
    count_ = 0;
    pthread_cond_broadcast(&idle_);
    return false;
  }
  thread_ = t;
  stats_.starts++;
  if (state_ == kStopped) {
    // stop() ran while we were creating it: it could not join what it did not
    // know yet. The helper sees kStopped and returns at once.
    pthread_cond_signal(&wake_);
    pthread_mutex_unlock(&lock_);
    pthread_join(t, nullptr);
    pthread_mutex_lock(&lock_);
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
  Locked g(lock_);
  for (;;) {
    while (count_ == 0 && state_ == kRunning) pthread_cond_wait(&wake_, &lock_);
    if (state_ != kRunning) break;
    os::Range r = queue_[head_];
    head_ = (head_ + 1) % kQueue;
    count_--;
    busy_ = true;
    pthread_mutex_unlock(&lock_);
    bool ok = os_->populate(r.addr, r.size);
    pthread_mutex_lock(&lock_);
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
    Locked g(lock_);
    if (state_ == kRunning) {
      join = stats_.starts != 0 && !pthread_equal(thread_, pthread_t{});
      t = thread_;
    }
    if (state_ != kFailed) state_ = kStopped;
    pending_start_.store(false, std::memory_order_relaxed);
    stats_.dropped += count_;
    count_ = 0;
    pthread_cond_broadcast(&wake_);
    pthread_cond_broadcast(&idle_);
  }
  if (join) pthread_join(t, nullptr);
  Locked g(lock_);
  thread_ = pthread_t{};
}

void Prefaulter::drain() noexcept {
  Locked g(lock_);
  while (state_ == kRunning && (count_ != 0 || busy_)) pthread_cond_wait(&idle_, &lock_);
}

PrefaultStats Prefaulter::stats() noexcept {
  Locked g(lock_);
  PrefaultStats s = stats_;
  s.running = state_ == kRunning && !pthread_equal(thread_, pthread_t{});
  return s;
}

void Prefaulter::prefork() noexcept { pthread_mutex_lock(&lock_); }
void Prefaulter::postfork_parent() noexcept { pthread_mutex_unlock(&lock_); }

void Prefaulter::postfork_child() noexcept {
  // The helper did not come along: forget it. The queue's ranges belong to
  // the child's copy of the address space too, so they stay; the child starts
  // its own helper on its next slow path if anything is queued.
  pthread_mutex_init(&lock_, nullptr);
  pthread_cond_init(&wake_, nullptr);
  pthread_cond_init(&idle_, nullptr);
  thread_ = pthread_t{};
  busy_ = false;
  if (state_ == kRunning) state_ = kIdle;
  pending_start_.store(state_ == kIdle && count_ != 0, std::memory_order_relaxed);
}

}  // namespace ductile::small
