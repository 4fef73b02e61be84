/* SPDX-License-Identifier: BSD-2-Clause */
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
// at its last, which is all that neighbour lookups need. *Mapped ranges*
// (set_range) are entries for every page of an extent, tagged or not, for
// upper layers that look up interior pointers.
//
// Where an entry lives. The entries of the first and the last page of each
// 2 MiB of address (a *chunk*) live side by side in a small array of the
// leaf, its *edges* (two slots per chunk, 8 KiB per leaf), every other
// page's in the page's own slot; each page has one entry, read by one load.
// A huge span starts and ends at chunk boundaries, and the slots of two
// spans 2 MiB or more apart lie in different 4 KiB pages of the leaf: with
// the slots, a resident page of metadata per span boundary (30 000 sparsely
// used 2-4 MiB blocks held 245 MiB of it), and free() of a huge block would
// fault in its chunk's page of slots just by reading it.
//
// Invariants the chunk layer keeps: entries strictly inside an extent are
// zero unless a mapped range covers them, and an active extent's last page
// is recorded only where it was a free extent's last page before: a record
// that becomes interior is cleared, never left pointing at a merged extent.
//
// Pages of slots are given back. Records come and go at arbitrary pages as
// extents split and merge, and without this every page of slots a boundary
// ever fell in stayed resident: cycles of huge blocks at ever new addresses
// ended with one resident page per 2 MiB of every reservation (2 MiB per
// GiB, 58 MiB for 30 GiB reserved), nearly all of it zeroes. Each leaf has
// three bits per 2 MiB of address (a *chunk*): *written*, its page of slots
// was written since it was last given back; *idle*, a zero was stored there
// since the pass last found it in use; *recent*, it was written since the
// last pass. release_idle(), the pass, gives back the pages of idle chunks
// that no store touched since the pass before and that hold only zeroes.
// The chunk layer runs it with its decay, so a page of slots goes back once
// it has held only zeroes for a quarter of the decay time (at least a
// second). Given back at
// every free instead, the records of a cycle of huge blocks were faulted in
// again round after round, and the cycles took four times as long. The
// pass runs under the chunk layer's lock, which every writer of a page that
// may hold only zeroes holds too: it cannot drop a store made while it
// looks. And reads count: a read of a never-written anonymous page costs a
// page fault and maps it (the shared zero page, or a page of its own on
// kernels without one), and a store after it faults again. So lookup() --
// the chunk layer's neighbour lookups, at arbitrary pages -- does not read
// a page of slots whose written bit is clear, nor a page of edges never
// written (a bit per page of edges: the first reservation's two leaves
// faulted each of theirs twice): every entry there is zero.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/lock.h"
#include "chunk/extent.h"
#include "chunk/meta_alloc.h"
#include "os/os.h"

namespace ductile::chunk {

class PageMap {
 public:
  static constexpr unsigned kAddressBits = 48;
  static constexpr unsigned kLevelBits = 18;
  static constexpr size_t kFanout = size_t{1} << kLevelBits;
  static_assert(kPageShift + 2 * kLevelBits == kAddressBits, "two levels cover the address space");
  // The address space one leaf covers (1 GiB), aligned to it.
  static constexpr size_t kLeafSpan = kFanout << kPageShift;

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
  // In a forked child: the leaf lock is free (a leaf is published whole,
  // with one store, so a creation cut short left nothing half made).
  void postfork_child() noexcept { grow_lock_.reinit_after_fork(); }

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
    return leaf->at(a).load(std::memory_order_acquire);
  }
  // The extent recorded or mapped at page a; nullptr where none is. Unlike
  // lookup_entry(), does not read (and so fault in) a page of slots that
  // holds only zeroes: for lookups at pages that may have no entry.
  Extent* lookup(uintptr_t a) const noexcept;

  // Maps every page of [a, a+len) to e, with `tag` (a mapped range; nullptr
  // clears the page entries), plus `tag_step` for each page after the
  // first. Fails only when metadata cannot be allocated; then nothing the
  // caller relies on has changed for pages that could not be set (they
  // keep their old value).
  [[nodiscard]] bool set_range(uintptr_t a, size_t len, Extent* e, uint16_t tag = 0,
                               uint16_t tag_step = 0) noexcept;
  // Sets the tag of page a's entry, which holds e already.
  void set_tag(uintptr_t a, Extent* e, uint16_t tag) noexcept;
  // Records e at its first and last page: enough for neighbour lookups.
  [[nodiscard]] bool set_boundaries(Extent* e) noexcept;
  // Records an extent being handed out (kActive) at its first page only: its
  // last page keeps what it holds, zero or e (see the invariants above).
  [[nodiscard]] bool set_active_boundaries(Extent* e) noexcept;
  // Clears e's records at its first and last page.
  void clear_boundaries(const Extent* e) noexcept;
  // Clears the record at page a (one that became an extent's interior).
  void clear_record(uintptr_t a) noexcept;
  // Writes the root's entry for a's leaf, still empty, in a map that has
  // no leaf yet (its constructor's caller, with the address of its first
  // reservation): in zeroed storage the page of the root holding it is then
  // faulted in once, by this write, not first by the read that finds no
  // leaf (which maps the zero page) and again by the store of the leaf.
  void touch_root(uintptr_t a) noexcept {
    if (in_range(a)) root_[(a >> kPageShift) >> kLevelBits].store(nullptr, std::memory_order_relaxed);
  }
  // Pre-creates the nodes covering [a, a+len), so later sets cannot fail.
  [[nodiscard]] bool ensure(uintptr_t a, size_t len) noexcept;

  // The pass: gives back (through `os`) the pages of slots of idle chunks
  // that no store touched since the last pass and that hold only zeroes,
  // looking at `budget` idle chunks at most. The caller holds the lock that
  // every writer of a page of slots holding only zeroes holds (see above).
  // Returns the bytes given back; *more: idle chunks were left unchecked.
  // Without `aged`, every idle chunk that holds only zeroes goes (trim).
  size_t release_idle(os::Os& os, size_t budget = SIZE_MAX, bool* more = nullptr, bool aged = true) noexcept;
  // Pages of entries written and not given back since: at most what the
  // map's leaves hold resident, besides their edges.
  size_t written_pages() const noexcept { return written_pages_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kCoarse = kFanout >> (kHugePageShift - kPageShift);
  static size_t chunk_index(uintptr_t a) noexcept { return (a >> kHugePageShift) & (kCoarse - 1); }
  static constexpr size_t kChunkPages = kHugePage / kPage;  // entries in one page of entries
  struct Leaf {
    std::atomic<uintptr_t> slots[kFanout];
    std::atomic<uintptr_t> edges[2 * kCoarse];  // each chunk's first and last page's entries
    std::atomic<uint64_t> written[kCoarse / 64];  // per chunk: its page of slots was written
    std::atomic<uint64_t> idle[kCoarse / 64];     // per chunk: a zero was stored in its page
    std::atomic<uint64_t> recent[kCoarse / 64];   // per chunk: written since the last pass
    std::atomic<uint64_t> edges_written;          // per page of edges: it was written
    Leaf* next;                                   // the list of leaves, for the pass

    // Where page a's entry lives. The page number plus one, masked to its
    // chunk, is 1 for a chunk's first page and 0 for its last: one compare.
    // The first is even and the last odd, so their parity picks the edge.
    DUCTILE_ALWAYS_INLINE std::atomic<uintptr_t>& at(uintptr_t a) noexcept {
      const size_t page = a >> kPageShift;
      if (DUCTILE_LIKELY(((page + 1) & (kChunkPages - 1)) > 1)) return slots[page & (kFanout - 1)];
      return edges[2 * chunk_index(a) + (page & 1)];
    }
  };
 public:
  // A leaf's bytes: what a metadata allocator's first block holds besides
  // its first records (ChunkLayer).
  static constexpr size_t kLeafBytes = sizeof(Leaf);

 private:
  // Whether page a's entry is in a page of slots (not a chunk's first or last page).
  static bool in_slots(uintptr_t a) noexcept { return (((a >> kPageShift) + 1) & (kChunkPages - 1)) > 1; }
  // The page of edges holding the entry of a chunk's first or last page a.
  static constexpr size_t kEdgeChunksPerPage = kPage / (2 * sizeof(uintptr_t));
  static size_t edge_page(uintptr_t a) noexcept { return chunk_index(a) / kEdgeChunksPerPage; }
  static_assert(2 * kCoarse * sizeof(uintptr_t) / kPage <= 64, "a bit per page of edges");
  static_assert(kChunkPages * sizeof(uintptr_t) == kPage, "one page of entries per 2 MiB chunk");
  Leaf* leaf_of(uintptr_t a) const noexcept {
    return root_[(a >> kPageShift) >> kLevelBits].load(std::memory_order_acquire);
  }
  // Per-chunk bits (Leaf::written, idle, recent). set_bit: true when it was clear.
  static bool set_bit(std::atomic<uint64_t>* bits, size_t c) noexcept {
    const uint64_t bit = uint64_t{1} << (c % 64);
    return (bits[c / 64].load(std::memory_order_relaxed) & bit) == 0 &&
           (bits[c / 64].fetch_or(bit, std::memory_order_relaxed) & bit) == 0;
  }
  static void clear_bit(std::atomic<uint64_t>* bits, size_t c) noexcept {
    bits[c / 64].fetch_and(~(uint64_t{1} << (c % 64)), std::memory_order_relaxed);
  }
  static bool has_bit(const std::atomic<uint64_t>* bits, size_t c) noexcept {
    return (bits[c / 64].load(std::memory_order_relaxed) >> (c % 64)) & 1;
  }
  // Notes that the page of slots holding a's entry is being written.
  void mark_written(Leaf* leaf, uintptr_t a) noexcept {
    const size_t c = chunk_index(a);
    if (set_bit(leaf->written, c)) written_pages_.fetch_add(1, std::memory_order_relaxed);
    (void)set_bit(leaf->recent, c);
  }
  // Stores v into page a's entry (its leaf exists): every write goes here,
  // which marks a page of slots written (and idle, for a zero).
  void store(uintptr_t a, uintptr_t v) noexcept;
  // The leaf covering a, created if missing and `create`; nullptr if none.
  Leaf* leaf_for(uintptr_t a, bool create) noexcept;

  MetaAlloc& meta_;
  Mutex grow_lock_;  // serialises leaf creation only
  std::atomic<size_t> written_pages_{0};
  std::atomic<Leaf*> leaves_{nullptr};  // every leaf, newest first (grow_lock_ to add)
  std::atomic<Leaf*> root_[kFanout];  // cleared by the constructor, or already zero
};

}  // namespace ductile::chunk
