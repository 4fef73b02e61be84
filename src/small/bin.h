/* SPDX-License-Identifier: BSD-2-Clause */
// Layer 4, small objects: the central bins. One bin per small size class
// holds that class's slabs -- extents carved into equal objects, with no
// per-object header -- and hands objects to thread caches in batches.
//
// A slab's never-used objects are handed out by bumping an index, so pages a
// slab has not reached yet are never touched (not faulted in). Freed objects
// of classes from kMinBitmapSize are marked in a bitmap that follows the slab
// header: a flush sets a bit and writes nothing into the object, a fill finds
// set bits a word at a time and reads no object, handing them out in address
// order. Freed 8- and 16-byte objects go on an intrusive free list (linked
// through their first word) instead, where the bitmap would cost too much.
// A slab is found from any of its objects in
// O(1): the chunk layer's page map maps every page of a slab to its extent,
// whose `owner` is the slab header.
//
// Retention with hysteresis: a slab that becomes empty stays in its bin, so a
// class whose live count keeps dropping to zero never goes back to the chunk
// layer. Empty slabs beyond kRetainEmpty are released (purged, returned to the
// chunk layer as clean space) once they have stayed empty for the decay time
// (a thread's exit leaves them to it), or on trim (every empty slab).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/counter.h"
#include "base/lock.h"
#include "chunk/chunk.h"
#include "small/region.h"
#include "small/seal.h"
#include "small/size_classes.h"

namespace ductile::small {

// --enable-hardened (kHardened): a freed small or medium block holds its
// freed mark in its first word -- a keyed hash of its address -- from its
// free until it is handed out again. free() checks that the block does not
// carry it already (a double free, found at the second free: free_marked)
// and stores it; every hand-out (a thread cache's pop, an uncached take
// from a bin) checks the mark and clears it (take_marked), so a block
// written after its free ends the program before it is handed out (a
// program's data equals the mark with probability 2^-63). Never-used
// objects get their mark from the bin that hands them to a cache
// (Bin::fill).
//
// The hash: the address XOR one key, mixed by two rounds of xor-shift and
// multiply, XOR a second key (g_freed_key, from AT_RANDOM at start-up).
// A mark read from a freed block (a leak) gives neither key, nor any other
// block's mark: with the address XOR one secret, as before, one leaked mark
// gave the secret and with it a forged mark for every block.
extern uint64_t g_freed_key[2];
DUCTILE_ALWAYS_INLINE uintptr_t freed_mark(const void* p) {
  uint64_t x = addr(p) ^ g_freed_key[0];
  x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 29)) * 0x94d049bb133111ebull;
  return static_cast<uintptr_t>((x ^ (x >> 32) ^ g_freed_key[1]) | 1);  // odd: a zeroed word is never a mark
}
// Sets the keys from `seed` (start-up).
void set_freed_key(uint64_t seed) noexcept;
// A block's seal key (small/seal.h).
DUCTILE_ALWAYS_INLINE uint64_t seal_key(const void* p) { return seal_key_of(freed_mark(p)); }
// Where a block's mark lives: its first word.
DUCTILE_ALWAYS_INLINE uintptr_t& mark_word(void* p) { return *static_cast<uintptr_t*>(p); }
// The fill: a sample of the freed blocks (Options::freed_fill) hold
// kFreedFill in their bytes past the mark, up to kFreedFillMax of them and
// short of the seal word (small/seal.h), and their mark with kFilledMark
// flipped; the hand-out checks the bytes too, so a write after free past
// the first word is found there.
inline constexpr uintptr_t kFilledMark = 2;
inline constexpr size_t kFreedFillMax = 1024;
inline constexpr uint64_t kFreedFill = 0xdbdbdbdbdbdbdbdbull;
// Whether the block carries its mark (`mark`, freed_mark(p)), filled or not.
DUCTILE_ALWAYS_INLINE bool is_freed(void* p, uintptr_t mark) { return (mark_word(p) | kFilledMark) == (mark | kFilledMark); }
DUCTILE_ALWAYS_INLINE bool is_freed(void* p) { return is_freed(p, freed_mark(p)); }
// The report of free_marked: "free(): double free detected".
[[noreturn]] void freed_twice(const void* p) noexcept;
// Fills the block p's bytes past the mark, of the `block` it has, with kFreedFill.
void fill_freed(void* p, size_t block) noexcept;
// A free: the block must not carry its mark (`mark`, freed_mark(p))
// already; then it does, and with `fill` (a block of `block` bytes) it is
// filled.
DUCTILE_ALWAYS_INLINE void free_marked(void* p, uintptr_t mark, bool fill, size_t block) {
  if (DUCTILE_UNLIKELY(is_freed(p, mark))) freed_twice(p);
  if (DUCTILE_UNLIKELY(fill)) {
    fill_freed(p, block);
    mark ^= kFilledMark;
  }
  mark_word(p) = mark;
}
// The report of take_marked: "double free or write after free detected".
[[noreturn]] void freed_block_changed(const void* p) noexcept;
// A filled block (of `block` bytes) handed out: its fill must be whole.
void take_filled(void* p, size_t block) noexcept;
// A hand-out of the block p (`block` bytes): its mark must be there, and a
// filled block's fill whole; the mark goes. Returns the mark (for its seal).
DUCTILE_ALWAYS_INLINE uintptr_t take_marked(void* p, size_t block) {
  const uintptr_t mark = freed_mark(p);
  if (DUCTILE_UNLIKELY(mark_word(p) != mark)) {
    if (mark_word(p) != (mark ^ kFilledMark)) freed_block_changed(p);
    take_filled(p, block);
  }
  mark_word(p) = 0;
  return mark;
}

struct Slab {
  chunk::Extent* extent = nullptr;
  Region* region = nullptr;  // the slab region it was lent from
  class Bin* bin = nullptr;  // the bin that holds it (one per class per arena)
  uintptr_t base = 0;
  void* free_list = nullptr;  // freed objects of free-list classes; the first word links them
  uint32_t nfree = 0;         // freed objects plus never-used ones
  uint32_t bump = 0;          // index of the first never-used object
  uint32_t nobjs = 0;
  uint16_t cls = 0;
  uint8_t list = 0;  // which list of its bin holds it (Bin::List)
  uint8_t first_word = 0;  // bitmap classes: the words below this one are zero
  uint64_t empty_since = 0;  // when it last became entirely free
  Slab* prev = nullptr;
  Slab* next = nullptr;

  // Bitmap classes: bit i of the kClasses.bitmap_words[cls] words after the
  // header is set when object i (below bump) is free.
  uint64_t* bits() noexcept { return reinterpret_cast<uint64_t*>(this + 1); }
};
static_assert(sizeof(Slab) % alignof(uint64_t) == 0);

struct BinStats {
  size_t slabs = 0;        // slabs held (any state)
  size_t empty_slabs = 0;  // of which entirely free
  size_t free_objects = 0; // free objects in slabs (not in thread caches)
  uint64_t slab_allocs = 0;   // slabs taken from the chunk layer
  uint64_t slab_returns = 0;  // slabs given back to it
};

class Bin {
 public:
  // Empty slabs kept per class: one, as the seed fact's fix did ("keep one
  // empty page per size class").
  static constexpr size_t kRetainEmpty = 1;

  Bin() = default;
  Bin(const Bin&) = delete;
  Bin& operator=(const Bin&) = delete;
  // `hardened`: every class keeps freed objects in a bitmap, and a flush
  // checks each object (a block start, handed out, not free already).
  void init(size_t cls, SlabArena* arena, bool hardened = false) noexcept;

  // Takes up to n objects into out[]; returns how many (0 when out of memory).
  // kHardened: never-used objects get their freed mark here.
  size_t fill(void** out, size_t n) noexcept;
  // Returns the objects among objs[0..n) whose slabs this bin holds; the
  // others (of the same class, other arenas' slabs) are moved to the front
  // and their number returned.
  size_t flush(void** objs, size_t n) noexcept;
  // Returns n objects of one class, each to the bin that holds its slab.
  static void flush_to_owners(const chunk::ChunkLayer& chunks, void** objs, size_t n) noexcept;
  static Bin* owner_of(const chunk::ChunkLayer& chunks, const void* p) noexcept;
  // Releases empty slabs beyond kRetainEmpty now, aged or not.
  void release_surplus() noexcept { release_empty(kRetainEmpty); }
  // Releases every empty slab (trim).
  void trim() noexcept { release_empty(0); }
  // Releases empty slabs beyond kRetainEmpty that have stayed empty for the
  // decay time, oldest first, at most `max_pages` pages of them (decay steps:
  // the background thread's, and those run from other classes' calls -- a
  // class nobody frees into any more would otherwise keep them for ever).
  // Their pages count as idle since the slabs emptied.
  struct DecayResult {
    size_t pages = 0;    // released
    bool more = false;   // surplus empty slabs remain (aged or not)
    bool due = false;    // of which some have aged: the budget stopped it
  };
  DecayResult decay(size_t max_pages = SIZE_MAX) noexcept;

  // Without the lock (counters kept under it): never waits for a fill or a
  // flush, and costs the same however many slabs the bin holds.
  BinStats stats() const noexcept;
  // The free objects and empty slabs counted slab by slab under the lock:
  // what the counters must always equal (tests).
  BinStats walk_stats() const noexcept;
  void prefork() noexcept { lock_.lock(); }
  void postfork_parent() noexcept { lock_.unlock(); }
  void postfork_child() noexcept { lock_.reinit_after_fork(); }

 private:
  enum List : uint8_t { kFull, kPartial, kEmpty };
  Slab* new_slab() noexcept;
  void link(Slab* s, List l) noexcept;
  void unlink(Slab* s) noexcept;
  // Purges and returns empty slabs (oldest first) until `keep` remain,
  // only those empty for at least `min_age_ns` (empty since before `now`).
  // At most max_pages pages; returns the pages released. *due: aged empty
  // slabs are left because of the budget.
  size_t release_empty(size_t keep, uint64_t min_age_ns = 0, uint64_t now = 0, size_t max_pages = SIZE_MAX,
                       bool* due = nullptr) noexcept;
  // Unlinks an empty slab and drops its header; returns its pages.
  Lent take_empty(Slab* s) noexcept;
  // The header of slab s, every object free, as a fresh slab's: no freed
  // objects, none used yet.
  void start_over(Slab* s) noexcept;

  template <bool kBitmap>
  size_t flush_locked(void** objs, size_t n, Lent* expired, size_t& nexpired) noexcept;
  void settle(Slab* s, uint32_t freed, Lent* expired, size_t& nexpired) noexcept;
  // Take up to n of slab s's freed objects (not its never-used ones), from
  // its free list or its bitmap; fill() then bumps.
  size_t fill_list(Slab* s, void** out, size_t n) noexcept;
  size_t fill_bitmap(Slab* s, void** out, size_t n) noexcept;

  Mutex lock_;
  SlabArena* arena_ = nullptr;
  uint32_t cls_ = 0;
  uint32_t size_ = 0;
  uint32_t words_ = 0;     // bitmap words per slab; 0 for a free-list class
  bool hardened_ = false;
  uint32_t div_magic_ = 0; // ceil(2^32 / size_): offset * magic >> 32 is the index
  // The index of the object at `offset` bytes from its slab's base.
  size_t index_at(uintptr_t offset) const noexcept { return (offset * div_magic_) >> 32; }
  Slab* partial_ = nullptr;
  Slab* empty_ = nullptr;       // newest first
  Slab* empty_tail_ = nullptr;  // oldest
  size_t nempty_ = 0;  // written with relaxed atomic stores: stats() reads it without the lock
  // The statistics (stats()), kept under the lock, read without it.
  LockedCounter<size_t> slabs_;         // slabs held
  LockedCounter<size_t> free_objects_;  // the sum of their nfree
  LockedCounter<uint64_t> slab_allocs_;
  LockedCounter<uint64_t> slab_returns_;
};

// Slab headers (with their bitmaps) come from the chunk layer's metadata
// allocator and are recycled, one pool per bitmap length.
class SlabPool {
 public:
  static Slab* get(chunk::MetaAlloc& meta, size_t words) noexcept;
  static void put(Slab* s, size_t words) noexcept;
  static void prefork() noexcept;
  static void postfork_parent() noexcept;
  static void postfork_child() noexcept;
};

}  // namespace ductile::small
