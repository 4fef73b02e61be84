/* SPDX-License-Identifier: BSD-2-Clause */
// The chunk layer's notion of time, injected so that tests drive decay with a
// fake clock (test/support/fake_clock.h).
#pragma once

#include <time.h>

#include <cstdint>

namespace ductile::chunk {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t now_ns() noexcept = 0;
};

// CLOCK_MONOTONIC_COARSE: a vDSO read (no system call), resolution of a few
// milliseconds, which is plenty for decay times measured in seconds.
class MonotonicClock final : public Clock {
 public:
  uint64_t now_ns() noexcept override {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  }
};

}  // namespace ductile::chunk
