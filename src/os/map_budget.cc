// SPDX-License-Identifier: BSD-2-Clause
// The mapping budget (os/map_budget.h): the process's mappings counted
// against vm.max_map_count.
#include "os/map_budget.h"

#include "base/common.h"

namespace ductile::os {

void MapBudget::init(size_t limit) noexcept {
  if (limit == 0) limit = kDefaultMaxMapCount;
  limit_.store(limit, std::memory_order_relaxed);
  threshold_.store(limit / 2, std::memory_order_relaxed);
  limit_known_.store(true, std::memory_order_release);
  if (last_.load(std::memory_order_relaxed) == 0) gap_.store(gap_after(0), std::memory_order_relaxed);
}

void MapBudget::read_limit(Kernel& k) noexcept {
  const KeepErrno keep;  // the file's read must not change the caller's errno (a refusal's ENOMEM)
  char buf[64];
  size_t n = 0;
  if (k.read_small_file("/proc/sys/vm/max_map_count", buf, sizeof buf) > 0)
    for (const char* c = buf; *c >= '0' && *c <= '9'; c++) n = n * 10 + static_cast<size_t>(*c - '0');
  init(n);
}

size_t MapBudget::gap_after(size_t count) const noexcept {
  // Below the threshold: half the way to it, so the count never overshoots
  // it by more than the floor. At or past it: a quarter of the count, so the
  // cost of counting (proportional to the count) stays a few mappings' worth
  // per noted call. The floor, a sixteenth of the threshold, bounds both.
  const size_t threshold = threshold_.load(std::memory_order_relaxed);
  const size_t floor = threshold / 16 + 1;
  // Nothing counted yet: the first count comes after kFirstGap noted
  // mappings, so that a program that already holds many is seen before our
  // splits add many more (it costs about 50 us in a small process, once).
  if (count == 0) return kFirstGap < floor ? kFirstGap : floor;
  const size_t gap = count < threshold ? (threshold - count) / 2 : count / 4;
  return gap > floor ? gap : floor;
}

void MapBudget::recount(Kernel& k, bool for_refusal) noexcept {
  // One thread counts; the others go on with the answer they have.
  if (counting_.exchange(true, std::memory_order_acquire)) return;
  ensure_limit(k);
  const size_t threshold = threshold_.load(std::memory_order_relaxed);
  const size_t n = k.count_mappings();
  if (n != 0) {
    last_.store(n, std::memory_order_relaxed);
    tight_.store(n >= threshold, std::memory_order_relaxed);
    gap_.store(gap_after(n), std::memory_order_relaxed);
  } else {
    // /proc/self/maps unreadable (no /proc): try again only now and then.
    gap_.store(threshold, std::memory_order_relaxed);
  }
  since_.store(0, std::memory_order_relaxed);
  refusal_counted_.store(for_refusal, std::memory_order_relaxed);
  counts_.fetch_add(1, std::memory_order_relaxed);
  counting_.store(false, std::memory_order_release);
}

}  // namespace ductile::os
