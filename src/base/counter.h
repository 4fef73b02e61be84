/* SPDX-License-Identifier: BSD-2-Clause */
// A figure that code holding a lock keeps up to date and that statistics read
// without it. Only a holder of the lock writes it -- one writer at a time, so
// an update is a relaxed atomic load and store, no read-modify-write
// instruction (on x86-64 and arm64 the plain instructions) -- and a reader
// loads it relaxed, whenever it likes. A reader sees each figure whole;
// figures read one after another may be a change apart, as a busy process's
// figures are anyway.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ductile {

template <typename T>
class LockedCounter {
 public:
  constexpr LockedCounter() = default;
  LockedCounter(const LockedCounter&) = delete;
  LockedCounter& operator=(const LockedCounter&) = delete;

  // Readers: any thread, no lock.
  T load() const noexcept { return v_.load(std::memory_order_relaxed); }
  operator T() const noexcept { return load(); }  // NOLINT: reads as the number it counts

  // Writers: the lock's holder.
  void store(T v) noexcept { v_.store(v, std::memory_order_relaxed); }
  LockedCounter& operator+=(T d) noexcept {
    store(load() + d);
    return *this;
  }
  LockedCounter& operator-=(T d) noexcept {
    store(load() - d);
    return *this;
  }
  void operator++(int) noexcept { *this += 1; }
  void operator--(int) noexcept { *this -= 1; }

 private:
  std::atomic<T> v_{0};
};

}  // namespace ductile
