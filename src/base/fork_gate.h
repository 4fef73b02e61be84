/* SPDX-License-Identifier: BSD-2-Clause */
// The fork gate: work that takes something out of a shared structure and
// puts it back later, outside the structure's lock (a purge batch, slabs on
// their way from a bin to the slab arena, a huge block between its mremap
// and the chunk layer's forgetting of the old range), runs inside the gate.
// fork() closes the gate before it takes any lock of ductile's (after
// stdio's list lock, see core/fork.cc's prefork): it waits until no such
// work is in flight, and new work waits until the fork is done. Otherwise
// the child, where the thread doing the work does not exist, would never
// see those things come back.
//
// Entering is one atomic add on a shared word, so it belongs on slow paths
// only. The gate nests per thread. enter() may wait, so it is called
// holding no allocator lock; under a lock, try_enter() declines instead.
#pragma once

#include <atomic>

namespace ductile {

class ForkGate {
 public:
  // Blocks while a fork is in progress (the caller must hold no allocator lock).
  static void enter() noexcept;
  // Enters unless a fork is in progress: for callers holding a lock, which
  // then leave the work for later.
  [[nodiscard]] static bool try_enter() noexcept;
  static void leave() noexcept;
  // The fork handlers: close waits until nothing is in flight.
  static void close() noexcept;
  static void open() noexcept;
  static void reset_in_child() noexcept;
  // Whether the calling thread is inside the gate.
  static bool inside() noexcept;
};

// enter() ... leave() for a scope.
class InFlight {
 public:
  InFlight() noexcept { ForkGate::enter(); }
  ~InFlight() { ForkGate::leave(); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
};

}  // namespace ductile
