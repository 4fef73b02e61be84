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
//
// Two kinds of entries. *Records* say where an extent begins and ends: the
// chunk layer writes one at an extent's first page and (for a free extent)
// at its last, which is all that neighbour lookups need. A record at a
// 2 MiB-aligned page goes to the leaf's *coarse* slots, one per 2 MiB,
// instead of the page's own entry: a huge span starts (and its neighbour
// starts) at such a page, and the page entries of two spans 2 MiB or more
// apart lie in different 4 KiB pages of the leaf, a resident page of
// metadata per span (30 000 sparsely used 2-4 MiB blocks held 245 MiB of
// it). *Mapped ranges* (set_range) are page entries for every page of an
// extent, tagged or not, for upper layers that look up interior pointers.
// lookup_entry() reads the page entry and, where that is zero at a
// 2 MiB-aligned page, the coarse slot. Invariants the chunk layer keeps:
//  * the page entry of a 2 MiB-aligned page is zero unless a mapped range
//    covers it (records never go there);
//  * entries strictly inside an extent are zero unless a mapped range
//    covers them, and an active extent's last page is recorded only where
//    it was a free extent's last page before: a record that becomes
//    interior is cleared, never left pointing at a merged extent. (Reading
//    an entry to check it is no help: on some kernels a read of a
//    never-written page makes it resident too.)
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
  // extent is recorded or mapped there.
  DUCTILE_ALWAYS_INLINE uintptr_t lookup_entry(uintptr_t a) const noexcept {
    // The root index doubles as the range test: it is below kFanout exactly
    // when a is below 2^kAddressBits (one shift fewer for free()).
    const size_t top = a >> (kPageShift + kLevelBits);
    if (top >= kFanout) return 0;
    Leaf* leaf = root_[top].load(std::memory_order_acquire);
    if (leaf == nullptr) return 0;
    uintptr_t v = leaf->slots[(a >> kPageShift) & (kFanout - 1)].load(std::memory_order_acquire);
    if (DUCTILE_UNLIKELY(v == 0) && (a & (kHugePage - kPage)) == 0)
      v = leaf->coarse[(a >> kHugePageShift) & (kCoarse - 1)].load(std::memory_order_acquire);
    return v;
  }
  // nullptr when no extent was ever registered at that page.
  Extent* lookup(uintptr_t a) const noexcept { return entry_extent(lookup_entry(a)); }

  // Maps every page of [a, a+len) to e, with `tag` (a mapped range; nullptr
  // clears the page entries), plus `tag_step` for each page after the
  // first. Fails only when metadata cannot be allocated; then nothing the
  // caller relies on has changed for pages that could not be set (they
  // keep their old value).
  [[nodiscard]] bool set_range(uintptr_t a, size_t len, Extent* e, uint16_t tag = 0,
                               uint16_t tag_step = 0) noexcept;
  // Sets the tag of page a's entry, which holds e already: its page entry
  // where a mapped range covers it (`mapped`), else e's record there.
  void set_tag(uintptr_t a, Extent* e, uint16_t tag, bool mapped) noexcept;
  // Records e at its first and last page: enough for neighbour lookups.
  [[nodiscard]] bool set_boundaries(Extent* e) noexcept;
  // Records an extent being handed out (kActive) at its first page only: its
  // last page keeps what it holds, zero or e (see the invariants above).
  [[nodiscard]] bool set_active_boundaries(Extent* e) noexcept;
  // Clears e's records at its first and last page.
  void clear_boundaries(const Extent* e) noexcept;
  // Clears the record at page a (one that became an extent's interior).
  void clear_record(uintptr_t a) noexcept;
  // Pre-creates the nodes covering [a, a+len), so later sets cannot fail.
  [[nodiscard]] bool ensure(uintptr_t a, size_t len) noexcept;

 private:
  static constexpr size_t kCoarse = kFanout >> (kHugePageShift - kPageShift);
  struct Leaf {
    std::atomic<uintptr_t> slots[kFanout];
    std::atomic<uintptr_t> coarse[kCoarse];  // records at 2 MiB-aligned pages
  };
  std::atomic<uintptr_t>* entry(uintptr_t a, bool create) noexcept;
  // Where page a's record lives: its coarse slot when a is 2 MiB-aligned,
  // else its page entry.
  std::atomic<uintptr_t>* record(uintptr_t a, bool create) noexcept;

  MetaAlloc& meta_;
  Mutex grow_lock_;  // serialises leaf creation only
  std::atomic<Leaf*> root_[kFanout];  // cleared by the constructor, or already zero
};

}  // namespace ductile::chunk
