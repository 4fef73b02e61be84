/* SPDX-License-Identifier: BSD-2-Clause */
// A clock that moves only when a test says so.
#pragma once

#include <atomic>
#include <cstdint>

#include "chunk/clock.h"

namespace ductile::test {

class FakeClock final : public chunk::Clock {
 public:
  uint64_t now_ns() noexcept override { return now_.load(std::memory_order_relaxed); }
  void advance_ms(uint64_t ms) { now_.fetch_add(ms * 1000000u, std::memory_order_relaxed); }

 private:
  // Starts well away from zero, as a real monotonic clock does.
  std::atomic<uint64_t> now_{1000000000000u};
};

}  // namespace ductile::test
