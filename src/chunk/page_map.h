// The page map: which extent owns a given page, answered in O(1) without a
// lock. A two-level radix tree over the 36-bit page number of a 48-bit
// address (18 bits per level): the root is an array inside the map (2 MiB of
// address space, in the runtime's static storage, of which only the pages
// holding used entries are ever touched), and each leaf covers 1 GiB with
// 2 MiB of entries, taken from the metadata allocator on demand and never
// freed, so a reader racing with a writer always dereferences valid memory.
// Two levels rather than three: free() looks a pointer up on every call, and
// each level is a dependent load. Readers use acquire loads; writers (under
// the chunk layer's lock, or owning the extent) use release stores.
//
// An entry is the Extent* in its low 48 bits and a 16-bit *tag* in the high
// bits (x86-64 and arm64 user addresses have them clear), which an upper
// layer may set for its own fast path: free() reads a slab's size class there
// instead of loading the extent. lookup() strips the tag; every write that
// does not pass a tag clears it, so a tag never outlives the mapping it was
// set with.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/lock.h"
#include "chunk/extent.h"
#include "chunk/meta_alloc.h"

namespace ductile::chunk {

class PageMap {
 public:
  static constexpr unsigned kAddressBits = 48;
  static constexpr unsigned kLevelBits = 18;
  static constexpr size_t kFanout = size_t{1} << kLevelBits;
  static_assert(kPageShift + 2 * kLevelBits == kAddressBits, "two levels cover the address space");

  // `storage_zeroed`: the map is being constructed in memory that is known
  // to be zero (the runtime's static storage), so the 2 MiB root is not
  // cleared: clearing it would fault in all 512 of its pages, 2 MiB of RSS
  // for every process, where only the pages holding used entries need be.
  explicit PageMap(MetaAlloc& meta, bool storage_zeroed = false) noexcept : meta_(meta) {
    if (!storage_zeroed)
      for (auto& r : root_) r.store(nullptr, std::memory_order_relaxed);
  }
  PageMap(const PageMap&) = delete;
  PageMap& operator=(const PageMap&) = delete;

  static constexpr unsigned kTagShift = kAddressBits;
  static constexpr uintptr_t kPointerMask = (uintptr_t{1} << kTagShift) - 1;

  static bool in_range(uintptr_t a) { return (a >> kAddressBits) == 0; }
  static uintptr_t make_entry(Extent* e, uint16_t tag) {
    DUCTILE_ASSERT(in_range(reinterpret_cast<uintptr_t>(e)));
    return reinterpret_cast<uintptr_t>(e) | (static_cast<uintptr_t>(tag) << kTagShift);
  }
  static Extent* entry_extent(uintptr_t v) { return reinterpret_cast<Extent*>(v & kPointerMask); }
  static uint16_t entry_tag(uintptr_t v) { return static_cast<uint16_t>(v >> kTagShift); }

  // The raw entry (extent pointer and tag) of the page holding a; 0 when no
  // extent was ever registered there.
  DUCTILE_ALWAYS_INLINE uintptr_t lookup_entry(uintptr_t a) const noexcept {
    // The root index doubles as the range test: it is below kFanout exactly
    // when a is below 2^kAddressBits (one shift fewer for free()).
    const size_t top = a >> (kPageShift + kLevelBits);
    if (top >= kFanout) return 0;
    Leaf* leaf = root_[top].load(std::memory_order_acquire);
    if (leaf == nullptr) return 0;
    return leaf->slots[(a >> kPageShift) & (kFanout - 1)].load(std::memory_order_acquire);
  }
  // nullptr when no extent was ever registered at that page.
  Extent* lookup(uintptr_t a) const noexcept { return entry_extent(lookup_entry(a)); }

  // Maps every page of [a, a+len) to e, with `tag`. Fails only when metadata
  // cannot be allocated; then nothing the caller relies on has changed for
  // pages that could not be set (they keep their old value).
  [[nodiscard]] bool set_range(uintptr_t a, size_t len, Extent* e, uint16_t tag = 0) noexcept;
  // Sets the tag of the page holding a, which must map to e already.
  void set_tag(uintptr_t a, Extent* e, uint16_t tag) noexcept;
  // Maps the first and last page of e to e: enough for neighbour lookups.
  [[nodiscard]] bool set_boundaries(Extent* e) noexcept;
  // Pre-creates the nodes covering [a, a+len), so later sets cannot fail.
  [[nodiscard]] bool ensure(uintptr_t a, size_t len) noexcept;

 private:
  struct Leaf {
    std::atomic<uintptr_t> slots[kFanout];
  };
  std::atomic<uintptr_t>* entry(uintptr_t a, bool create) noexcept;

  MetaAlloc& meta_;
  Mutex grow_lock_;  // serialises leaf creation only
  std::atomic<Leaf*> root_[kFanout];  // cleared by the constructor, or already zero
};

}  // namespace ductile::chunk
