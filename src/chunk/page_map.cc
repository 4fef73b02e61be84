// SPDX-License-Identifier: BSD-2-Clause
// The page map (chunk/page_map.h): its leaves, lookups, and the writes of an
// extent's entries and tags.
#include "chunk/page_map.h"

namespace ductile::chunk {

PageMap::Leaf* PageMap::leaf_for(uintptr_t a, bool create) noexcept {
  if (!in_range(a)) return nullptr;
  std::atomic<Leaf*>& child = root_[(a >> kPageShift) >> kLevelBits];
  Leaf* leaf = child.load(std::memory_order_acquire);
  if (leaf == nullptr) {
    if (!create) return nullptr;
    LockGuard g(grow_lock_);
    leaf = child.load(std::memory_order_acquire);
    if (leaf == nullptr) {
      leaf = static_cast<Leaf*>(meta_.alloc(sizeof(Leaf), kPage));
      if (leaf == nullptr) return nullptr;
      leaf->next = leaves_.load(std::memory_order_relaxed);
      leaves_.store(leaf, std::memory_order_release);
      child.store(leaf, std::memory_order_release);
    }
  }
  return leaf;
}

Extent* PageMap::lookup(uintptr_t a) const noexcept {
  if (!in_range(a)) return nullptr;
  Leaf* leaf = leaf_of(a);
  if (leaf == nullptr) return nullptr;
  // A page of entries never written holds only zeroes: not read, so not
  // faulted in (and then faulted again by the store that follows).
  if (in_slots(a) ? !has_bit(leaf->written, chunk_index(a)) : !has_bit(&leaf->edges_written, edge_page(a)))
    return nullptr;
  return entry_extent(leaf->at(a).load(std::memory_order_acquire));
}

void PageMap::store(uintptr_t a, uintptr_t v) noexcept {
  Leaf* leaf = leaf_of(a);
  DUCTILE_ASSERT(leaf != nullptr);
  if (in_slots(a)) {
    mark_written(leaf, a);
    if (v == 0) (void)set_bit(leaf->idle, chunk_index(a));
  } else {
    (void)set_bit(&leaf->edges_written, edge_page(a));
  }
  leaf->at(a).store(v, std::memory_order_release);
}

bool PageMap::ensure(uintptr_t a, size_t len) noexcept {
  if (len == 0) return true;
  uintptr_t last = a + len - 1;
  if (last < a || !in_range(last)) return false;
  // One address per leaf is enough to create the leaf.
  for (uintptr_t p = align_down(a, kLeafSpan); p <= last; p += kLeafSpan) {
    if (leaf_for(p < a ? a : p, true) == nullptr) return false;
    if (p + kLeafSpan < p) break;
  }
  return true;
}

bool PageMap::set_range(uintptr_t a, size_t len, Extent* e, uint16_t tag, uint16_t tag_step) noexcept {
  if (!ensure(a, len)) return false;
  DUCTILE_ASSERT(tag_step == 0 || tag + ((len >> kPageShift) - 1) * tag_step <= UINT16_MAX);
  for (uintptr_t p = a; p < a + len; p += kPage) {
    store(p, make_entry(e, tag));
    tag = static_cast<uint16_t>(tag + tag_step);
  }
  return true;
}

void PageMap::set_tag(uintptr_t a, Extent* e, uint16_t tag) noexcept {
  Leaf* leaf = in_range(a) ? leaf_of(a) : nullptr;
  DUCTILE_CHECK(leaf != nullptr && entry_extent(leaf->at(a).load(std::memory_order_relaxed)) == e);
  store(a, make_entry(e, tag));
}

bool PageMap::set_boundaries(Extent* e) noexcept {
  if (leaf_for(e->base, true) == nullptr || leaf_for(e->end() - kPage, true) == nullptr) return false;
  const uintptr_t v = make_entry(e, 0);
  store(e->base, v);
  store(e->end() - kPage, v);
  return true;
}

bool PageMap::set_active_boundaries(Extent* e) noexcept {
  if (leaf_for(e->base, true) == nullptr) return false;
  store(e->base, make_entry(e, 0));
  return true;
}

void PageMap::clear_record(uintptr_t a) noexcept {
  if (in_range(a) && leaf_of(a) != nullptr) store(a, 0);
}

void PageMap::clear_boundaries(const Extent* e) noexcept {
  clear_record(e->base);
  clear_record(e->end() - kPage);
}

size_t PageMap::release_idle(os::Os& os, size_t budget, bool* more, bool aged) noexcept {
  os::Range ranges[os::kPurgeBatch];
  size_t n = 0, bytes = 0;
  auto flush = [&] {
    // A range the kernel refused stays resident, its chunks no longer
    // marked written: until written again, counted as given back.
    const size_t done = os.purge(ranges, n);
    for (size_t k = 0; k < done; k++) bytes += ranges[k].size;
    n = 0;
  };
  if (more != nullptr) *more = false;
  for (Leaf* leaf = leaves_.load(std::memory_order_acquire); leaf != nullptr; leaf = leaf->next) {
    for (size_t w = 0; w < kCoarse / 64; w++) {
      uint64_t idle = leaf->idle[w].load(std::memory_order_relaxed);
      while (idle != 0) {
        if (budget == 0) {
          if (more != nullptr) *more = true;
          if (n > 0) flush();
          return bytes;
        }
        budget--;
        const size_t i = w * 64 + static_cast<size_t>(__builtin_ctzll(idle));
        idle &= idle - 1;
        if (has_bit(leaf->recent, i)) {
          // Written since the last pass: idle still, looked at again next time.
          clear_bit(leaf->recent, i);
          if (aged) continue;
        }
        clear_bit(leaf->idle, i);
        if (!has_bit(leaf->written, i)) continue;
        std::atomic<uintptr_t>* page = &leaf->slots[i * kChunkPages];
        bool zero = true;
        for (size_t k = 0; k < kChunkPages && zero; k++) zero = page[k].load(std::memory_order_relaxed) == 0;
        if (!zero) continue;
        clear_bit(leaf->written, i);
        written_pages_.fetch_sub(1, std::memory_order_relaxed);
        // Adjacent chunks' pages of slots are adjacent: one range for a run.
        void* at = static_cast<void*>(page);
        if (n > 0 && static_cast<char*>(ranges[n - 1].addr) + ranges[n - 1].size == at) {
          ranges[n - 1].size += kPage;
          continue;
        }
        if (n == os::kPurgeBatch) flush();
        ranges[n++] = os::Range{at, kPage};
      }
    }
  }
  if (n > 0) flush();
  return bytes;
}

}  // namespace ductile::chunk
