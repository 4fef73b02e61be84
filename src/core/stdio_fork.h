/* SPDX-License-Identifier: BSD-2-Clause */
// The C library's stdio list lock, taken around fork() before ductile's
// own locks. The one place that names the C library's private symbols.
//
// Why. stdio calls malloc while holding its locks: getline grows its
// buffer with realloc under the FILE's lock, and fflush(NULL) holds the
// list of open files while it locks each FILE in turn (and may allocate a
// buffer). So "stdio lock, then allocator lock" is an order the process
// already has. glibc's fork() runs the pthread_atfork prepare handlers
// first and takes the list lock after them (then its own malloc's locks);
// with only ductile's own locks in the prepare handler, fork took the
// two in the other order, and three threads could deadlock: the forking
// one holds ductile's locks and waits for the list; one in fflush(NULL)
// holds the list and waits for a FILE; one in getline holds that FILE and
// waits in realloc for ductile. Taking the list lock first in the prepare handler
// puts fork's order in line with everyone else's -- the order glibc uses
// for its own malloc.
//
// How. glibc exports _IO_list_lock, _IO_list_unlock and _IO_list_resetlock
// (GLIBC_2.2.5). The list lock is recursive for its owner, so fork's own
// _IO_list_lock() after the handlers succeeds at once, and its unlock in
// the parent (before the parent handlers run, and only when the process
// had more than one thread) leaves ours to undo. In the child glibc resets
// the lock itself before the child handlers run, but only when the parent
// had more than one thread; a reset here covers both cases (an unlock after
// glibc's reset would take the recursion count below zero, and the lock
// would never be free again). Declared weak: with a C library that lacks
// them the step is skipped, and fork is as before.
#pragma once

extern "C" {
void _IO_list_lock(void) __attribute__((weak, visibility("default")));
void _IO_list_unlock(void) __attribute__((weak, visibility("default")));
void _IO_list_resetlock(void) __attribute__((weak, visibility("default")));
}

namespace ductile::core::stdio_fork {

// Whether all three are there: taking the lock without a way to give it
// back would be worse than not taking it.
inline bool available() noexcept {
  return _IO_list_lock != nullptr && _IO_list_unlock != nullptr && _IO_list_resetlock != nullptr;
}

// First thing in the prepare handler, before any lock of ductile's.
inline void prepare() noexcept {
  if (available()) _IO_list_lock();
}

// Last thing in the parent handler, after ductile's locks are released.
inline void parent() noexcept {
  if (available()) _IO_list_unlock();
}

// In the child handler: the list lock is free whether or not glibc reset it.
inline void child() noexcept {
  if (available()) _IO_list_resetlock();
}

}  // namespace ductile::core::stdio_fork
