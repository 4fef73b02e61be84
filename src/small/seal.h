/* SPDX-License-Identifier: BSD-2-Clause */
// Hardened mode's seal: the word at a slab object's or medium block's end
// that finds a write past the size the program asked for. Header-only; the
// core seals a block where it hands it out and checks it where the block
// comes back (free, realloc, a size query).
//
// A block of `block` bytes that holds a request of `size` bytes ends with
// its seal word: kSealByte, then the block's keyed seal (seal_key) XOR the
// slack, the bytes between the request's end and the seal word (block -
// kSealSize - size). The first bytes of the slack, up to 8 of them, hold
// kSealByte too: the byte after the request is kSealByte in every block. A
// write past the request changes one or the other: the slack bytes, or the
// seal word, whose slack then decodes to no size this block can hold (a
// forged seal needs the key). The seal thus costs every block 8 bytes
// (sealed_size), and keeps the request's size, which is what
// malloc_usable_size reports in hardened mode: a program that writes up to
// it stays clear of the seal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/common.h"

namespace ductile::small {

inline constexpr size_t kSealSize = 8;
inline constexpr uint64_t kSealByte = 0xa5;
inline constexpr uint64_t kSealBytes = kSealByte * 0x0101010101010101ull;

// The report of a free slab object's seal word found broken where it is
// handed out: "malloc(): buffer overflow into a free block detected".
[[noreturn]] void free_block_overrun(const void* p) noexcept;

// The block size a request of `size` bytes needs with its seal: at least
// 16 bytes, so that the seal never shares the first word, which holds the
// freed mark once the block is freed. A size past PTRDIFF_MAX stays so
// (no block has it).
DUCTILE_ALWAYS_INLINE constexpr size_t sealed_size(size_t size) {
  return size < 8 ? 8 + kSealSize : (size > SIZE_MAX / 2 ? size : size + kSealSize);
}

// A block's seal key, from its freed mark (small/bin.h: a keyed hash of
// its address, which the paths that seal a block compute anyway): its
// halves swapped, so that a seal word is no mark. A seal word read from a
// live block gives its mark, as a read of it once freed would: no other
// block's.
DUCTILE_ALWAYS_INLINE uint64_t seal_key_of(uint64_t mark) { return (mark << 32) | (mark >> 32); }

// The seal word for a slack of `slack` bytes: its first byte kSealByte, so
// that the byte right after a request is kSealByte with or without slack
// (a one-byte overflow of any other value is found, whatever the key), then
// the slack XOR the key's low 56 bits.
DUCTILE_ALWAYS_INLINE uint64_t seal_word(uint64_t key, size_t slack) { return ((key ^ slack) << 8) | kSealByte; }
// The slack a seal word says; more than any block's where its first byte
// is not kSealByte.
DUCTILE_ALWAYS_INLINE uint64_t seal_slack(uint64_t word, uint64_t key) {
  return (word & 0xff) == kSealByte ? (word >> 8) ^ (key & (~uint64_t{0} >> 8)) : ~uint64_t{0};
}

namespace detail {
DUCTILE_ALWAYS_INLINE uint64_t load64(const unsigned char* at) {
  uint64_t w;
  std::memcpy(&w, at, sizeof w);
  return w;
}
DUCTILE_ALWAYS_INLINE void store64(unsigned char* at, uint64_t w) { std::memcpy(at, &w, sizeof w); }
// The word whose last bytes are the slack's first, up to 8 of them (none
// where there is no slack: the seal word itself then follows the request):
// its offset in the block, and a mask of those bytes. No branch: the slack
// of a program's blocks is as random as its sizes.
DUCTILE_ALWAYS_INLINE size_t fill_at(size_t size, size_t slack) { return size + (slack < 8 ? slack : 8) - 8; }
DUCTILE_ALWAYS_INLINE uint64_t fill_mask(size_t slack) {
  const unsigned bits = 4 * static_cast<unsigned>(slack < 8 ? slack : 8);
  return ~((~uint64_t{0} >> bits) >> bits);  // the high bytes: the word's last in memory
}
}  // namespace detail

// Seals the block p (`block` bytes, at least sealed_size(size); `key`:
// seal_key_of its mark) for a request of `size` bytes. The bytes below
// `size` are left as they are. `free_word`: p is a slab object being handed
// out, whose seal word must hold (seal_unused, below).
DUCTILE_ALWAYS_INLINE void seal(void* p, size_t block, size_t size, uint64_t key, bool free_word = false) {
  auto* b = static_cast<unsigned char*>(p);
  unsigned char* end = b + block - kSealSize;
  if (free_word && DUCTILE_UNLIKELY(seal_slack(detail::load64(end), key) > block - kSealSize)) free_block_overrun(p);
  const size_t slack = block - kSealSize - size;
  detail::store64(end, seal_word(key, slack));
  unsigned char* at = b + detail::fill_at(size, slack);
  const uint64_t m = detail::fill_mask(slack);
  detail::store64(at, (detail::load64(at) & ~m) | (kSealBytes & m));
}

// seal() of a block just handed out by a thread cache, whose bytes below
// `size` hold nothing yet: the fill's word is stored whole, with no load
// (a load there, or of the seal word, missed the cache where another
// thread had freed the block: the producer/consumer workload, 1.6x).
DUCTILE_ALWAYS_INLINE void seal_fresh(void* p, size_t block, size_t size, uint64_t key) {
  auto* b = static_cast<unsigned char*>(p);
  const size_t slack = block - kSealSize - size;
  detail::store64(b + block - kSealSize, seal_word(key, slack));
  detail::store64(b + detail::fill_at(size, slack), kSealBytes);
}

// A slab object that a bin hands a cache for the first time gets a seal
// word too (for no request), so that every free one carries one: kept from
// its last hand-out or from here. The hand-out checks it (seal's
// `free_word`), which finds a write into a free object that ran on from the
// one before or back from the one after.
DUCTILE_ALWAYS_INLINE void seal_unused(void* p, size_t block, uint64_t key) {
  detail::store64(static_cast<unsigned char*>(p) + block - kSealSize, seal_word(key, block - kSealSize));
}

// The request's size that the block p (`block` bytes) was sealed for, or
// SIZE_MAX where the seal or the slack's first bytes changed: a write past
// the request.
DUCTILE_ALWAYS_INLINE size_t sealed_request(const void* p, size_t block, uint64_t key) {
  const auto* b = static_cast<const unsigned char*>(p);
  const uint64_t slack = seal_slack(detail::load64(b + block - kSealSize), key);
  if (DUCTILE_UNLIKELY(slack > block - kSealSize)) return SIZE_MAX;
  const size_t size = block - kSealSize - slack;
  const uint64_t changed = (detail::load64(b + detail::fill_at(size, slack)) ^ kSealBytes) & detail::fill_mask(slack);
  return DUCTILE_LIKELY(changed == 0) ? size : SIZE_MAX;
}

}  // namespace ductile::small
