/* SPDX-License-Identifier: BSD-2-Clause */
// The medium depot: freed medium blocks of the smaller medium classes that
// no thread cache has room for, kept for the next thread cache that wants
// one, between the caches and the chunk layer.
//
// A thread cache holds a few medium blocks of each class (eight up to 32
// KiB). A program that frees more than that at once -- a batch, a thread's
// exit -- sent the rest to the chunk layer, one extent operation each
// (page-map stores, a free set's insert, coalescing: about 1 900
// instructions a block), and took them back the same way: a batch of 400
// blocks of 24 KiB cost 116 ns a block against mimalloc's 23. The depot
// keeps them as they were in the cache: active extents marked cached
// (chunk::Extent::cached, so a second free of one is still caught), taken
// and given in batches under one lock per class. It holds at most 1 MiB
// of a class (from 4 to 32 blocks), and gives back to the chunk layer --
// dirty, for decay -- the blocks that lay at its bottom through a period of
// 16 puts and takes (its low-water mark), everything that lay there
// untouched for a whole background step (a quarter of the decay time), and
// everything at trim.
//
// Hardened mode's threads without a cache (hardened:true alone has none)
// keep their freed medium blocks of up to 256 KiB there too, marked, so
// that the next hand-out or the way back to the chunk layer checks the
// mark (core/free.cc: depot_keep).
#pragma once

#include <cstddef>

namespace ductile::core {

// Bytes a class's depot holds at most, as blocks: from 4 to kDepotSlots.
inline constexpr size_t kDepotBytes = 1024 * 1024;
inline constexpr size_t kDepotSlots = 32;

// Whether class cls (a medium one) has a depot. Only once the process has
// had two threads with caches (depot_enable): a single thread does not
// contend for the chunk layer's lock, and its freed blocks are better left
// free there, where the chunk layer reuses them for any size and a
// neighbour grows into them (churn, a compiler-like single thread, peaked
// 4 % higher with a depot, medium-cycle 3 %).
bool depot_holds(size_t cls) noexcept;
// Whether class cls has a depot for hardened mode's threads without a cache
// (core/free.cc: depot_keep): the classes up to 256 KiB, from the start.
bool depot_holds_uncached(size_t cls) noexcept;
void depot_enable(bool on = true) noexcept;  // false: for tests
// Takes the first of the n medium blocks of class cls in `items` (a cache
// bin's slots: address and extent pairs) that the depot has room for;
// returns how many it took. Their marks stay as the cache left them.
size_t depot_put(size_t cls, void** items, size_t n) noexcept;
// Moves up to n blocks of class cls out of the depot into `items` (slot
// pairs, as a cache bin holds them, still marked cached); returns how many.
size_t depot_take(size_t cls, void** items, size_t n) noexcept;
// Gives back to the chunk layer the blocks that lay untouched since the
// last step (every block with `all`: trim); true while a depot holds one.
bool depot_step(bool all) noexcept;
// Bytes of blocks in the depots (statistics).
size_t depot_bytes() noexcept;

void depot_prefork() noexcept;
void depot_postfork_parent() noexcept;
void depot_postfork_child() noexcept;

}  // namespace ductile::core
