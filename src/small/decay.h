/* SPDX-License-Identifier: BSD-2-Clause */
// Decay of the small layer and the chunk layer below it, in steps: what the
// background thread runs, and what the allocator's own calls run when there
// is no background thread (or it has not started yet).
//
// An empty slab is released by its bin only once it has stayed empty for the
// decay time. A bin's own frees check that, but a class nobody frees into
// any more (a program that freed 512 MiB of 64-byte objects and went on with
// other sizes) never checks it again: its empty slabs stayed for good,
// 517 MiB resident past the decay time. So the calls of any class step every
// bin four times per decay time, each step with a budget of pages (one huge
// page by default: chunk::Options::decay_step_bytes); a step that runs out
// of budget lets the next call step again at once. Released slabs count as
// idle since they emptied, so the regions they leave empty are purged by the
// chunk layer's next step rather than a decay time later: empty slabs are
// gone within 1.5 x the decay time of emptying.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "small/bin.h"
#include "small/region.h"

namespace ductile::small {

class Decay {
 public:
  void init(Bin* bins, size_t nbins, SlabArena* arena) noexcept {
    bins_ = bins;
    nbins_ = nbins;
    arena_ = arena;
  }
  // From an allocator call that holds no lock: a bounded step when one is
  // due (four times per decay time, or at once while a backlog remains).
  // True while a backlog remains.
  bool tick() noexcept;
  // A thread's frees that only ever hit its cache reach no slow path: every
  // kEvent of them it looks (a tick), and while a backlog remains every
  // kBacklogEvent: a step is bounded, and 512 MiB of empty slabs at 2 MiB
  // per step takes 256 steps, which must fit in the decay time (at every
  // 256th free, a thread freeing 64 blocks per millisecond still held
  // 105 MiB of them at twice the decay time). Returns the frees until the
  // next look.
  static constexpr uint32_t kEvent = 4096;
  static constexpr uint32_t kBacklogEvent = 32;
  uint32_t look() noexcept { return tick() ? kBacklogEvent : kEvent; }
  // A step of at most `max_pages` pages released or purged in each layer.
  struct StepResult {
    bool backlog = false;  // some layer stopped at the budget with work due
    bool pending = false;  // something awaits decay (due now or later)
  };
  StepResult step(size_t max_pages = SIZE_MAX) noexcept;
  uint64_t steps() const noexcept { return steps_.load(std::memory_order_relaxed); }

 private:
  Bin* bins_ = nullptr;
  size_t nbins_ = 0;
  SlabArena* arena_ = nullptr;
  std::atomic<uint64_t> last_{0};
  std::atomic<bool> backlog_{false};
  std::atomic<size_t> cursor_{0};  // the bin the next bounded step starts at
  std::atomic<uint64_t> steps_{0};
};

}  // namespace ductile::small
