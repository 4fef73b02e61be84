// SPDX-License-Identifier: BSD-2-Clause
// ductile::vector with elements that throw: a copy, move or constructor
// fails at its n-th call, for every n in turn. Growth gives std::vector's
// strong guarantee (push_back, emplace_back, reserve, resize and an
// insertion at the end leave the contents as they were), the other
// operations the basic one (the vector is whole and can be destroyed), and
// no element or buffer is leaked: the live elements are counted, and the
// thread's allocated and deallocated bytes are compared.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "test/unit/api/vector_helpers.h"

namespace ductile::test {
namespace {

struct Boom {};
constexpr uint64_t kMovedFrom = ~uint64_t{0};

// The calls left before one throws (0: none throws), and the live elements.
long g_countdown = 0;
long g_live = 0;
void maybe_throw() {
  if (g_countdown > 0 && --g_countdown == 0) throw Boom();
}

// Its constructors and copies throw at the countdown's end; its moves too
// unless kNothrowMove (so a vector of it copies where it grows, to keep the
// strong guarantee); with kRelocatable it is marked relocatable.
template <bool kNothrowMove, bool kRelocatable>
struct Thrower {
  uint64_t v;
  explicit Thrower(uint64_t x) : v(x) {
    maybe_throw();
    ++g_live;
  }
  Thrower(const Thrower& o) : v(o.v) {
    maybe_throw();
    ++g_live;
  }
  // A move empties its source, so an element moved out and not back shows.
  Thrower(Thrower&& o) noexcept(kNothrowMove) : v(o.v) {
    if (!kNothrowMove) maybe_throw();
    o.v = kMovedFrom;
    ++g_live;
  }
  Thrower& operator=(const Thrower& o) {
    maybe_throw();
    v = o.v;
    return *this;
  }
  Thrower& operator=(Thrower&& o) noexcept(kNothrowMove) {
    if (!kNothrowMove) maybe_throw();
    v = o.v;
    o.v = kMovedFrom;
    return *this;
  }
  ~Thrower() { --g_live; }
  friend bool operator==(const Thrower& a, const Thrower& b) { return a.v == b.v; }
};

using CopiesToGrow = Thrower<false, false>;    // moves may throw: growth copies
using MovesToGrow = Thrower<true, false>;      // growth moves
using RelocatedToGrow = Thrower<false, true>;  // growth moves the bytes

}  // namespace
}  // namespace ductile::test

template <>
struct ductile::is_relocatable<ductile::test::RelocatedToGrow> : std::true_type {};

namespace ductile::test {
namespace {

uint64_t net_bytes() {
  uint64_t a = 0, d = 0;
  size_t len = sizeof a;
  EXPECT_EQ(ductile_mallctl("thread.allocated", &a, &len, nullptr, 0), 0);
  EXPECT_EQ(ductile_mallctl("thread.deallocated", &d, &len, nullptr, 0), 0);
  return a - d;
}

bool stats_counted() {
  bool on = false;
  size_t len = sizeof on;
  return ductile_mallctl("config.stats", &on, &len, nullptr, 0) == 0 && on;
}

template <class T>
class VectorExceptions : public ::testing::Test {
 protected:
  void SetUp() override {
    g_countdown = 0;
    g_live = 0;
    // A build without statistics (--disable-stats) has no byte counters:
    // its leak check is the elements' count alone.
    if (stats_counted()) bytes_ = net_bytes();
  }
  void TearDown() override {
    g_countdown = 0;
    EXPECT_EQ(g_live, 0) << "elements leaked, or destroyed twice";
    if (stats_counted()) {
      EXPECT_EQ(net_bytes(), bytes_) << "a buffer leaked";
    }
  }

  static constexpr bool kRelocatable = ductile::is_relocatable_v<T>;

  // A vector of elements 0, 1, ... with at least n of them and no room left.
  static ductile::vector<T> full(size_t n) {
    ductile::vector<T> v;
    for (uint64_t i = 0; i < n; i++) v.emplace_back(i);
    while (v.size() < v.capacity()) v.emplace_back(v.size());
    return v;
  }

  // Runs op on full(20) with a throw at its n-th element call, for n = 1,
  // 2, ... until op completes, and returns how many calls threw. After
  // each throw: with `strong`, the elements are as they were, and so are
  // the buffer and capacity (std::vector's guarantee; a relocatable vector
  // may keep the buffer it grew, `keeps_growth`); in any case the vector
  // holds all its live elements and nothing else (the basic guarantee).
  template <class Op>
  int each_throw(Op op, bool strong, bool keeps_growth = false) {
    int throws = 0;
    for (long n = 1; n < 1000; n++) {
      ductile::vector<T> v = full(20);
      const size_t size = v.size(), cap = v.capacity();
      const T* data = v.data();
      const long live = g_live;
      g_countdown = n;
      try {
        op(v);
        g_countdown = 0;
        return throws;
      } catch (const Boom&) {
        g_countdown = 0;
        throws++;
      }
      if (strong) {
        EXPECT_EQ(v.size(), size) << "throw at call " << n;
        for (size_t i = 0; i < size && i < v.size(); i++) EXPECT_EQ(v[i].v, i) << "throw at call " << n;
        if (!keeps_growth) {
          EXPECT_EQ(v.data(), data) << "throw at call " << n;
          EXPECT_EQ(v.capacity(), cap) << "throw at call " << n;
        }
      }
      EXPECT_EQ(g_live, live - static_cast<long>(size) + static_cast<long>(v.size())) << "throw at call " << n;
      if (this->HasFailure()) return throws;
    }
    ADD_FAILURE() << "op never completed";
    return throws;
  }

  uint64_t bytes_ = 0;
};

using ThrowerTypes = ::testing::Types<CopiesToGrow, MovesToGrow, RelocatedToGrow>;
TYPED_TEST_SUITE(VectorExceptions, ThrowerTypes);

// The calls a full vector of `cap` elements makes to grow by one: a copy of
// each where moves may throw, none where they cannot or the bytes move.
template <class T>
int growth_calls(size_t cap) {
  return std::is_same_v<T, CopiesToGrow> ? static_cast<int>(cap) : 0;
}

TYPED_TEST(VectorExceptions, PushBackIsStrong) {
  const size_t cap = this->full(20).capacity();
  // The argument made, its copy, and the growth.
  int throws = this->each_throw(
      [](ductile::vector<TypeParam>& v) {
        const TypeParam x(99);
        v.push_back(x);
      },
      true);
  EXPECT_EQ(throws, 2 + growth_calls<TypeParam>(cap));
}

TYPED_TEST(VectorExceptions, EmplaceBackIsStrong) {
  const size_t cap = this->full(20).capacity();
  int throws = this->each_throw([](ductile::vector<TypeParam>& v) { v.emplace_back(uint64_t{99}); }, true);
  EXPECT_EQ(throws, 1 + growth_calls<TypeParam>(cap));
}

TYPED_TEST(VectorExceptions, PushBackOfItsOwnElementIsStrong) {
  this->each_throw([](ductile::vector<TypeParam>& v) { v.push_back(v[3]); }, true);
  ductile::vector<TypeParam> v = this->full(20);
  v.push_back(v[3]);
  EXPECT_EQ(v.back().v, 3u);
}

TYPED_TEST(VectorExceptions, ReserveIsStrong) {
  const size_t cap = this->full(20).capacity();
  int throws = this->each_throw([](ductile::vector<TypeParam>& v) { v.reserve(4 * v.capacity()); }, true);
  EXPECT_EQ(throws, growth_calls<TypeParam>(cap));
}

TYPED_TEST(VectorExceptions, ResizeIsStrong) {
  // A relocatable vector grows its buffer before it makes the new elements.
  this->each_throw([](ductile::vector<TypeParam>& v) { v.resize(v.size() + 5, TypeParam(7)); }, true,
                   TestFixture::kRelocatable);
  this->each_throw([](ductile::vector<TypeParam>& v) { v.resize(v.size() + 5, v[2]); }, true,
                   TestFixture::kRelocatable);
}

TYPED_TEST(VectorExceptions, InsertAtTheEndIsStrong) {
  const std::vector<TypeParam> more(5, TypeParam(8));
  this->each_throw([&more](ductile::vector<TypeParam>& v) { v.insert(v.end(), more.begin(), more.end()); }, true,
                   TestFixture::kRelocatable);
  this->each_throw([](ductile::vector<TypeParam>& v) { v.insert(v.end(), TypeParam(9)); }, true);
}

// Elsewhere, as in std::vector, the basic guarantee: the vector stays whole.
TYPED_TEST(VectorExceptions, OtherModifiersAreBasic) {
  const std::vector<TypeParam> more(5, TypeParam(8));
  this->each_throw([](ductile::vector<TypeParam>& v) { v.insert(v.begin() + 3, TypeParam(9)); }, false);
  this->each_throw([](ductile::vector<TypeParam>& v) { v.insert(v.begin() + 3, 4, v[5]); }, false);
  this->each_throw([&more](ductile::vector<TypeParam>& v) { v.insert(v.begin() + 1, more.begin(), more.end()); },
                   false);
  this->each_throw(
      [&more](ductile::vector<TypeParam>& v) {
        v.insert(v.begin() + 1, InputIt<TypeParam>(more.data()), InputIt<TypeParam>(more.data() + more.size()));
      },
      false);
  this->each_throw([](ductile::vector<TypeParam>& v) { v.emplace(v.begin(), uint64_t{5}); }, false);
  this->each_throw([](ductile::vector<TypeParam>& v) { v.erase(v.begin() + 2, v.begin() + 6); }, false);
  this->each_throw([&more](ductile::vector<TypeParam>& v) { v.assign(more.begin(), more.end()); }, false);
  this->each_throw([](ductile::vector<TypeParam>& v) { v.assign(100, TypeParam(3)); }, false);
  this->each_throw(
      [](ductile::vector<TypeParam>& v) {
        ductile::vector<TypeParam> other(3, TypeParam(4));
        v = other;
        other = v;
      },
      false);
}

// shrink_to_fit gives up quietly: where a copy throws, the vector is as it
// was.
TYPED_TEST(VectorExceptions, ShrinkToFitLeavesTheVectorOnAThrow) {
  ductile::vector<TypeParam> v = this->full(20);
  v.erase(v.begin() + 2, v.end());
  const TypeParam* data = v.data();
  g_countdown = 1;  // the first call throws
  v.shrink_to_fit();
  if (std::is_same_v<TypeParam, CopiesToGrow>) {
    EXPECT_EQ(g_countdown, 0) << "no copy was tried";
    EXPECT_EQ(v.data(), data);
  } else {
    EXPECT_EQ(g_countdown, 1) << "an element was copied or moved";
    EXPECT_LT(v.capacity(), 20u);
  }
  g_countdown = 0;
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[1].v, 1u);
}

// A constructor that throws destroys what it made and frees its buffer
// (the fixture's TearDown counts both).
TYPED_TEST(VectorExceptions, ConstructorsLeakNothing) {
  const std::vector<TypeParam> src(30, TypeParam(6));
  for (long n = 1; n < 100; n++) {
    g_countdown = n;
    try {
      ductile::vector<TypeParam> a(30, TypeParam(1));
      ductile::vector<TypeParam> b(src.begin(), src.end());
      ductile::vector<TypeParam> c(InputIt<TypeParam>(src.data()), InputIt<TypeParam>(src.data() + src.size()));
      ductile::vector<TypeParam> d(c);
      ductile::vector<TypeParam> e = {TypeParam(1), TypeParam(2)};
      g_countdown = 0;
      EXPECT_EQ(d.size(), 30u);
      break;
    } catch (const Boom&) {
      EXPECT_EQ(g_live, 30) << "throw at call " << n;  // src's
    }
  }
  EXPECT_EQ(g_countdown, 0);
}

}  // namespace
}  // namespace ductile::test
