#include "huge/advised_set.h"

namespace ductile::huge {

size_t AdvisedSet::first_ending_at_or_after(uintptr_t a) const noexcept {
  size_t lo = 0;
  size_t hi = n_;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v_[mid].hi < a) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

void AdvisedSet::erase(size_t from, size_t to) noexcept {
  for (size_t i = to; i < n_; i++) v_[from + (i - to)] = v_[i];
  n_ -= to - from;
}

bool AdvisedSet::covers(uintptr_t lo, uintptr_t hi) const noexcept {
  if (lo >= hi) return true;
  size_t i = first_ending_at_or_after(hi);
  // Intervals are disjoint and never adjacent, so a covered range lies in one.
  return i < n_ && v_[i].lo <= lo && hi <= v_[i].hi;
}

void AdvisedSet::add(uintptr_t lo, uintptr_t hi) noexcept {
  if (lo >= hi) return;
  // Every interval that overlaps or touches [lo, hi) merges into one.
  size_t i = first_ending_at_or_after(lo);
  size_t j = i;
  while (j < n_ && v_[j].lo <= hi) {
    if (v_[j].lo < lo) lo = v_[j].lo;
    if (v_[j].hi > hi) hi = v_[j].hi;
    j++;
  }
  if (j > i) {
    v_[i] = {lo, hi};
    erase(i + 1, j);
    return;
  }
  if (n_ == kCapacity) return;  // not remembered: it will be advised again, that is all
  for (size_t k = n_; k > i; k--) v_[k] = v_[k - 1];
  v_[i] = {lo, hi};
  n_++;
}

void AdvisedSet::remove(uintptr_t lo, uintptr_t hi) noexcept {
  if (lo >= hi) return;
  size_t i = first_ending_at_or_after(lo);
  if (i < n_ && v_[i].hi == lo) i++;  // ends exactly where the range starts: untouched
  size_t j = i;
  while (j < n_ && v_[j].lo < hi) j++;
  if (i == j) return;
  // [i, j) overlap the range. Keep the parts of the first and last outside it.
  Interval left = v_[i];
  Interval right = v_[j - 1];
  bool keep_left = left.lo < lo;
  bool keep_right = right.hi > hi;
  erase(i, j);
  if (keep_right) {
    // Re-inserting cannot merge: nothing else is left in [lo, hi).
    if (n_ < kCapacity) {
      for (size_t k = n_; k > i; k--) v_[k] = v_[k - 1];
      v_[i] = {hi, right.hi};
      n_++;
    }
  }
  if (keep_left && n_ < kCapacity) {
    for (size_t k = n_; k > i; k--) v_[k] = v_[k - 1];
    v_[i] = {left.lo, lo};
    n_++;
  }
}

}  // namespace ductile::huge
