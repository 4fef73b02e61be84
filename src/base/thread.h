/* SPDX-License-Identifier: BSD-2-Clause */
// Starting ductile's own helper threads (the prefault helper, the background
// thread), and holding off a cancellation.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <cstddef>

#include "base/common.h"

namespace ductile {

// Creates a thread running fn(arg) with a `stack`-byte stack and every
// signal blocked, so that no handler of the program ever runs on it (it
// inherits the mask it is created with). Returns pthread_create's result.
// It allocates (pthread_create does): call it holding no allocator lock.
// errno is left as it was: the thread starts inside a caller's malloc or free.
inline int start_helper_thread(pthread_t* t, void* (*fn)(void*), void* arg, size_t stack) noexcept {
  const KeepErrno keep;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int rc = pthread_create(t, &attr, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  return rc;
}

// While one lives, the calling thread is not cancelled: a cancellation
// requested before or meanwhile waits for its next cancellation point after
// (write(2) is one, and code that writes text out must finish it, as
// glibc's malloc_stats does). The thread's cancel state is put back as it
// was.
class NoCancel {
 public:
  NoCancel() noexcept { (void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_); }
  ~NoCancel() { (void)pthread_setcancelstate(old_, nullptr); }
  NoCancel(const NoCancel&) = delete;
  NoCancel& operator=(const NoCancel&) = delete;

 private:
  int old_ = PTHREAD_CANCEL_ENABLE;
};

}  // namespace ductile
