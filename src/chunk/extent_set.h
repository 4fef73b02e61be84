/* SPDX-License-Identifier: BSD-2-Clause */
// A set of free extents of one state (dirty or clean), indexed for best-fit
// search: segregated lists by page count -- exact below 16 pages, then four
// buckets per doubling -- with a bitmap of non-empty buckets. Each set also
// keeps its extents in the order they were inserted (the age list), which is
// the order decay purges dirty extents in. Not thread safe: the chunk layer's
// lock covers it (but bytes() and count() may be read without it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/counter.h"
#include "chunk/extent.h"

namespace ductile::chunk {

class ExtentSet {
 public:
  // Page counts 1..15 have a bucket each; from 16 pages on, four per doubling.
  static constexpr size_t kExactBuckets = 15;
  static constexpr size_t kBuckets = 192;

  // An empty set whose buckets' heads are `heads` (kBuckets of them), kept
  // apart from the set: the chunk layer's six sets then lie together in its
  // first bytes, and their heads, 9 KiB read only once a bucket holds an
  // extent, on pages of their own. `heads_zeroed`: they hold zeroes already
  // (the runtime's static storage) and are not written, so that a process's
  // start faults in none of those pages.
  explicit ExtentSet(Extent** heads, bool heads_zeroed = false) noexcept;
  ExtentSet(const ExtentSet&) = delete;
  ExtentSet& operator=(const ExtentSet&) = delete;

  static size_t bucket_of(size_t pages) noexcept;
  // Smallest page count that lands in bucket b.
  static size_t bucket_floor(size_t b) noexcept;

  void insert(Extent* e) noexcept;
  void remove(Extent* e) noexcept;
  // A free extent that can hold `size` bytes at an `align`-aligned address
  // inside it, or nullptr. Prefers the smallest bucket that fits and, within
  // a bucket, the most recently inserted extent (its pages are the likeliest
  // to be resident still).
  Extent* find(size_t size, size_t align) const noexcept;
  // The extent inserted longest ago, or nullptr.
  Extent* oldest() const noexcept { return age_head_; }
  // Up to `max` extents into `out`, the largest buckets first (within a
  // bucket, newest first): the candidates for reuse when none fits alone.
  // Returns how many.
  size_t largest(Extent** out, size_t max) const noexcept;
  // Whether an extent of the set holds address a (a walk of the age list:
  // for reports, not for hot paths).
  bool holds(uintptr_t a) const noexcept;

  size_t bytes() const noexcept { return bytes_; }
  size_t count() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }

 private:
  static bool fits(const Extent* e, size_t size, size_t align) noexcept {
    uintptr_t start = align_up(e->base, align);
    return start >= e->base && start - e->base <= e->size && e->size - (start - e->base) >= size;
  }
  size_t next_nonempty(size_t from) const noexcept;

  Extent** const heads_;  // [kBuckets]: read where nonempty_ has the bucket's bit
  uint64_t nonempty_[kBuckets / 64] = {};
  Extent* age_head_ = nullptr;
  Extent* age_tail_ = nullptr;
  // Read without the lock (ChunkLayer::stats).
  LockedCounter<size_t> bytes_;
  LockedCounter<size_t> count_;
};

}  // namespace ductile::chunk
