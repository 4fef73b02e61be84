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

bool PageMap::set_range(uintptr_t a, size_t len, Extent* e, uint16_t tag) noexcept {
  if (!ensure(a, len)) return false;
  const uintptr_t v = make_entry(e, tag);
  for (uintptr_t p = a; p < a + len; p += kPage) entry(p, false)->store(v, std::memory_order_release);
  return true;
}

void PageMap::set_tag(uintptr_t a, Extent* e, uint16_t tag) noexcept {
  std::atomic<uintptr_t>* slot = entry(a, false);
  DUCTILE_CHECK(slot != nullptr && entry_extent(slot->load(std::memory_order_relaxed)) == e);
  slot->store(make_entry(e, tag), std::memory_order_release);
}

bool PageMap::set_boundaries(Extent* e) noexcept {
  std::atomic<uintptr_t>* first = entry(e->base, true);
  std::atomic<uintptr_t>* last = entry(e->end() - kPage, true);
  if (first == nullptr || last == nullptr) return false;
  const uintptr_t v = make_entry(e, 0);
  first->store(v, std::memory_order_release);
  last->store(v, std::memory_order_release);
  return true;
}

}  // namespace ductile::chunk
