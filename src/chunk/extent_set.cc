// SPDX-License-Identifier: BSD-2-Clause
// A set of free extents (chunk/extent_set.h): size buckets, best fit, and
// the largest extents for a run of dirty ones.
#include "chunk/extent_set.h"

namespace ductile::chunk {

namespace {
// Within the size's own bucket some extents may be too small; look at no more
// than this many before moving to a bucket where everything is big enough.
constexpr int kBucketScan = 32;
unsigned log2_floor(size_t x) { return 63u - static_cast<unsigned>(__builtin_clzll(x)); }
}  // namespace

ExtentSet::ExtentSet(Extent** heads, bool heads_zeroed) noexcept : heads_(heads) {
  if (!heads_zeroed)
    for (size_t b = 0; b < kBuckets; b++) heads_[b] = nullptr;
}

size_t ExtentSet::bucket_of(size_t pages) noexcept {
  if (pages == 0) return 0;
  if (pages <= kExactBuckets) return pages - 1;
  unsigned lg = log2_floor(pages);  // >= 4: [16,20) is bucket 15
  size_t sub = (pages >> (lg - 2)) & 3;
  size_t b = kExactBuckets + (lg - 4) * 4 + sub;
  return b < kBuckets ? b : kBuckets - 1;
}

size_t ExtentSet::bucket_floor(size_t b) noexcept {
  if (b < kExactBuckets) return b + 1;
  size_t lg = (b - kExactBuckets) / 4 + 4;
  size_t sub = (b - kExactBuckets) % 4;
  return (4 + sub) << (lg - 2);
}

void ExtentSet::insert(Extent* e) noexcept {
  size_t b = bucket_of(e->size >> kPageShift);
  e->bucket = static_cast<uint8_t>(b);
  e->prev = nullptr;
  e->next = heads_[b];
  if (e->next) e->next->prev = e;
  heads_[b] = e;
  nonempty_[b / 64] |= uint64_t{1} << (b % 64);

  e->age_next = nullptr;
  e->age_prev = age_tail_;
  if (age_tail_) age_tail_->age_next = e;
  else age_head_ = e;
  age_tail_ = e;

  bytes_ += e->size;
  count_++;
}

void ExtentSet::remove(Extent* e) noexcept {
  size_t b = e->bucket;
  if (e->prev) e->prev->next = e->next;
  else heads_[b] = e->next;
  if (e->next) e->next->prev = e->prev;
  if (heads_[b] == nullptr) nonempty_[b / 64] &= ~(uint64_t{1} << (b % 64));
  e->prev = e->next = nullptr;

  if (e->age_prev) e->age_prev->age_next = e->age_next;
  else age_head_ = e->age_next;
  if (e->age_next) e->age_next->age_prev = e->age_prev;
  else age_tail_ = e->age_prev;
  e->age_prev = e->age_next = nullptr;

  bytes_ -= e->size;
  count_--;
}

size_t ExtentSet::next_nonempty(size_t from) const noexcept {
  for (size_t w = from / 64; w < kBuckets / 64; w++) {
    uint64_t bits = nonempty_[w];
    if (w == from / 64) bits &= ~uint64_t{0} << (from % 64);
    if (bits) return w * 64 + static_cast<size_t>(__builtin_ctzll(bits));
  }
  return kBuckets;
}

Extent* ExtentSet::find(size_t size, size_t align) const noexcept {
  size_t pages = size >> kPageShift;
  size_t b = next_nonempty(bucket_of(pages));
  // The first non-empty bucket may hold extents smaller than the request (its
  // floor is below it) or too small once aligned: scan it, then the next.
  // Past the request's own bucket every extent is big enough and only
  // alignment can make one fail, so the scan bound rarely matters there.
  for (; b < kBuckets; b = next_nonempty(b + 1)) {
    int scanned = 0;
    for (Extent* e = heads_[b]; e != nullptr && scanned < kBucketScan; e = e->next, scanned++) {
      if (fits(e, size, align)) return e;
    }
  }
  return nullptr;
}

bool ExtentSet::holds(uintptr_t a) const noexcept {
  for (const Extent* e = age_head_; e != nullptr; e = e->age_next)
    if (a >= e->base && a < e->end()) return true;
  return false;
}

size_t ExtentSet::largest(Extent** out, size_t max) const noexcept {
  size_t n = 0;
  for (size_t w = kBuckets / 64; w-- > 0 && n < max;) {
    for (uint64_t bits = nonempty_[w]; bits != 0 && n < max;) {
      unsigned top = 63u - static_cast<unsigned>(__builtin_clzll(bits));
      bits &= ~(uint64_t{1} << top);
      for (Extent* e = heads_[w * 64 + top]; e != nullptr && n < max; e = e->next) out[n++] = e;
    }
  }
  return n;
}

}  // namespace ductile::chunk
