// The address ranges the huge layer knows to carry MADV_HUGEPAGE.
//
// Advice is a property of the kernel's mapping (the VMA), not of the extent:
// it outlives a free, so a span recycled at a range advised before needs no
// new madvise -- and a huge alloc/free loop would otherwise make one system
// call per alloc. The set is a cache of what was advised: forgetting a range
// costs at most one repeated madvise; remembering a range that lost its
// advice (it was unmapped) would cost huge pages, so unmapped ranges are
// removed.
//
// Sorted, disjoint, non-adjacent intervals in a fixed array (no allocation).
// Adjacent advised ranges are one VMA in the kernel and one interval here, so
// the count stays small; when the array is full a new range is simply not
// remembered. Not thread safe: the huge layer holds its lock around it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ductile::huge {

class AdvisedSet {
 public:
  // 128 intervals (2 KiB): each is at least one advised span with something
  // unadvised on both sides, so it stands for two VMA splits; a process with
  // more has other problems than a repeated madvise.
  static constexpr size_t kCapacity = 128;

  // True when all of [lo, hi) is known to be advised.
  bool covers(uintptr_t lo, uintptr_t hi) const noexcept;
  // Remembers [lo, hi), merged with the intervals it touches.
  void add(uintptr_t lo, uintptr_t hi) noexcept;
  // Forgets [lo, hi) (it was unmapped, or its advice is not known any more).
  void remove(uintptr_t lo, uintptr_t hi) noexcept;
  size_t size() const noexcept { return n_; }
  void clear() noexcept { n_ = 0; }

 private:
  struct Interval {
    uintptr_t lo;
    uintptr_t hi;
  };
  // The index of the first interval whose end is at or after `a`.
  size_t first_ending_at_or_after(uintptr_t a) const noexcept;
  void erase(size_t from, size_t to) noexcept;

  Interval v_[kCapacity] = {};
  size_t n_ = 0;
};

}  // namespace ductile::huge
