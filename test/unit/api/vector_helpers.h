/* SPDX-License-Identifier: BSD-2-Clause */
// What the tests of ductile::vector share: element types of each kind
// (trivially copyable, over-aligned, marked relocatable, not relocatable, one
// that knows its own address), values made from a number, an input iterator
// (single pass) over a std::vector, and ductile's huge growth counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ductile/vector.h"

namespace ductile::test {

// Holds its value on the heap: not trivially copyable, but its bytes may
// move (a std::unique_ptr holds no pointer into itself), so it is marked
// relocatable below. A moved-from Boxed holds nothing.
struct Boxed {
  std::unique_ptr<uint64_t> p;
  Boxed() = default;
  explicit Boxed(uint64_t v) : p(std::make_unique<uint64_t>(v)) {}
  Boxed(const Boxed& o) : p(o.p ? std::make_unique<uint64_t>(*o.p) : nullptr) {}
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(const Boxed& o) {
    p = o.p ? std::make_unique<uint64_t>(*o.p) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;
  uint64_t value() const { return p ? *p : ~uint64_t{0}; }
  friend bool operator==(const Boxed& a, const Boxed& b) { return a.value() == b.value(); }
  friend bool operator<(const Boxed& a, const Boxed& b) { return a.value() < b.value(); }
  friend std::ostream& operator<<(std::ostream& os, const Boxed& b) { return os << "Boxed(" << b.value() << ")"; }
};

// Knows its own address: copies and moves set it, so an element whose bytes
// were copied to another address (a relocation, which this type does not
// allow) no longer passes ok(). Its destructor spoils it (with volatile
// stores, which the compiler keeps), so an element read after it was
// destroyed does not pass either.
struct Anchored {
  uint64_t v = 0;
  const Anchored* self = this;
  Anchored() = default;
  explicit Anchored(uint64_t x) : v(x) {}
  Anchored(const Anchored& o) : v(o.v) {}
  Anchored& operator=(const Anchored& o) {
    v = o.v;
    return *this;
  }
  ~Anchored() {
    *static_cast<volatile uint64_t*>(&v) = 0xdeadull;
    *static_cast<const Anchored* volatile*>(&self) = nullptr;
  }
  bool ok() const { return self == this; }
  friend bool operator==(const Anchored& a, const Anchored& b) { return a.v == b.v && a.ok() && b.ok(); }
  friend bool operator<(const Anchored& a, const Anchored& b) { return a.v < b.v; }
  friend std::ostream& operator<<(std::ostream& os, const Anchored& a) {
    return os << "Anchored(" << a.v << (a.ok() ? "" : ", moved by its bytes") << ")";
  }
};

// Trivially copyable and aligned past max_align_t: its buffer is asked for
// with MALLOCX_LG_ALIGN.
struct alignas(64) Wide {
  uint64_t v = 0;
  Wide() = default;
  explicit Wide(uint64_t x) : v(x) {}
  friend bool operator==(const Wide& a, const Wide& b) { return a.v == b.v; }
  friend bool operator<(const Wide& a, const Wide& b) { return a.v < b.v; }
  friend std::ostream& operator<<(std::ostream& os, const Wide& w) { return os << "Wide(" << w.v << ")"; }
};

// ductile's counts of huge blocks grown, by path (the mallctl names
// "ductile.huge.growth.<path>").
inline constexpr const char* kGrowthPaths[] = {"headroom", "neighbour", "fixed_map", "mremap", "copy"};
inline constexpr size_t kMremap = 3, kCopy = 4;
struct Growth {
  uint64_t by[5] = {};
  // Grown by the huge layer without a copy: in place, or by mremap.
  uint64_t resized() const { return by[0] + by[1] + by[2] + by[3]; }
  uint64_t copies() const { return by[kCopy]; }
};
inline Growth growth() {
  Growth g;
  for (size_t i = 0; i < 5; i++) {
    const std::string name = std::string("ductile.huge.growth.") + kGrowthPaths[i];
    size_t len = sizeof g.by[i];
    EXPECT_EQ(ductile_mallctl(name.c_str(), &g.by[i], &len, nullptr, 0), 0) << name;
  }
  return g;
}

// An element made from a number: strings short (in the string's own bytes)
// and long (on the heap).
template <class T>
T make(uint64_t k) {
  if constexpr (std::is_same_v<T, std::string>) {
    std::string s = std::to_string(k);
    return k % 3 == 0 ? s + std::string(40, 'x') : s;
  } else {
    return T(k);
  }
}

// A single-pass iterator over a std::vector's elements, for the overloads
// that take input iterators.
template <class T>
class InputIt {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using pointer = const T*;
  using reference = const T&;
  InputIt() = default;
  explicit InputIt(const T* p) : p_(p) {}
  reference operator*() const { return *p_; }
  InputIt& operator++() {
    ++p_;
    return *this;
  }
  InputIt operator++(int) {
    InputIt t = *this;
    ++p_;
    return t;
  }
  friend bool operator==(InputIt a, InputIt b) { return a.p_ == b.p_; }
  friend bool operator!=(InputIt a, InputIt b) { return a.p_ != b.p_; }

 private:
  const T* p_ = nullptr;
};

}  // namespace ductile::test

template <>
struct ductile::is_relocatable<ductile::test::Boxed> : std::true_type {};

static_assert(ductile::is_relocatable_v<uint64_t>);
static_assert(ductile::is_relocatable_v<ductile::test::Wide>);
static_assert(ductile::is_relocatable_v<ductile::test::Boxed>);
static_assert(!ductile::is_relocatable_v<ductile::test::Anchored>);
static_assert(!ductile::is_relocatable_v<std::string>);
