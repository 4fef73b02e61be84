#include "chunk/page_map.h"

namespace ductile::chunk {

std::atomic<uintptr_t>* PageMap::entry(uintptr_t a, bool create) noexcept {
  if (!in_range(a)) return nullptr;
  size_t page = a >> kPageShift;
  std::atomic<Leaf*>& child = root_[page >> kLevelBits];
  Leaf* leaf = child.load(std::memory_order_acquire);
  if (leaf == nullptr) {
    if (!create) return nullptr;
    LockGuard g(grow_lock_);
    leaf = child.load(std::memory_order_acquire);
    if (leaf == nullptr) {
      leaf = static_cast<Leaf*>(meta_.alloc(sizeof(Leaf), kPage));
      if (leaf == nullptr) return nullptr;
      child.store(leaf, std::memory_order_release);
    }
  }
  return &leaf->slots[page & (kFanout - 1)];
}

std::atomic<uintptr_t>* PageMap::record(uintptr_t a, bool create) noexcept {
  std::atomic<uintptr_t>* slot = entry(a, create);
  if (slot == nullptr || (a & (kHugePage - 1)) != 0) return slot;
  Leaf* leaf = root_[(a >> kPageShift) >> kLevelBits].load(std::memory_order_relaxed);
  return &leaf->coarse[(a >> kHugePageShift) & (kCoarse - 1)];
}

bool PageMap::ensure(uintptr_t a, size_t len) noexcept {
  if (len == 0) return true;
  uintptr_t last = a + len - 1;
  if (last < a || !in_range(last)) return false;
  // One entry per leaf is enough to create the leaf.
  constexpr size_t kLeafSpan = kFanout << kPageShift;
  for (uintptr_t p = align_down(a, kLeafSpan); p <= last; p += kLeafSpan) {
    if (entry(p < a ? a : p, true) == nullptr) return false;
    if (p + kLeafSpan < p) break;
  }
  return true;
}

bool PageMap::set_range(uintptr_t a, size_t len, Extent* e, uint16_t tag, uint16_t tag_step) noexcept {
  if (!ensure(a, len)) return false;
  DUCTILE_ASSERT(tag_step == 0 || tag + ((len >> kPageShift) - 1) * tag_step <= UINT16_MAX);
  for (uintptr_t p = a; p < a + len; p += kPage) {
    entry(p, false)->store(make_entry(e, tag), std::memory_order_release);
    tag = static_cast<uint16_t>(tag + tag_step);
  }
  return true;
}

void PageMap::set_tag(uintptr_t a, Extent* e, uint16_t tag, bool mapped) noexcept {
  std::atomic<uintptr_t>* slot = mapped ? entry(a, false) : record(a, false);
  DUCTILE_CHECK(slot != nullptr && entry_extent(slot->load(std::memory_order_relaxed)) == e);
  slot->store(make_entry(e, tag), std::memory_order_release);
}

bool PageMap::set_boundaries(Extent* e) noexcept {
  std::atomic<uintptr_t>* first = record(e->base, true);
  std::atomic<uintptr_t>* last = record(e->end() - kPage, true);
  if (first == nullptr || last == nullptr) return false;
  const uintptr_t v = make_entry(e, 0);
  first->store(v, std::memory_order_release);
  last->store(v, std::memory_order_release);
  return true;
}

bool PageMap::set_active_boundaries(Extent* e) noexcept {
  std::atomic<uintptr_t>* first = record(e->base, true);
  if (first == nullptr) return false;
  first->store(make_entry(e, 0), std::memory_order_release);
  return true;
}

void PageMap::clear_record(uintptr_t a) noexcept {
  if (std::atomic<uintptr_t>* slot = record(a, false)) slot->store(0, std::memory_order_release);
}

void PageMap::clear_boundaries(const Extent* e) noexcept {
  clear_record(e->base);
  clear_record(e->end() - kPage);
}

}  // namespace ductile::chunk
