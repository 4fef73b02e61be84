// SPDX-License-Identifier: BSD-2-Clause
// ductile::vector's interface, case by case: each constructor and
// assignment, the capacity (the block's whole usable size), alignment,
// max_size, shrink_to_fit, move-only and incomplete element types, and the
// path each kind of element grows by (the huge layer's resize for
// relocatable ones, new buffers for the others).
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "test/unit/api/vector_helpers.h"

namespace ductile::test {
namespace {

static_assert(std::is_nothrow_move_constructible_v<ductile::vector<std::string>>);
static_assert(std::is_nothrow_move_assignable_v<ductile::vector<std::string>>);
static_assert(std::is_same_v<ductile::vector<int>::iterator, int*>);
static_assert(std::is_same_v<ductile::vector<int>::const_reverse_iterator, std::reverse_iterator<const int*>>);

TEST(Vector, Constructors) {
  ductile::vector<int> empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.capacity(), 0u);
  EXPECT_EQ(empty.data(), nullptr);

  ductile::vector<int> zeros(5);
  EXPECT_EQ(zeros, (ductile::vector<int>{0, 0, 0, 0, 0}));
  ductile::vector<std::string> filled(3, "abc");
  EXPECT_EQ(filled.size(), 3u);
  EXPECT_EQ(filled[2], "abc");
  // (size_type, value) with two ints is not the iterator pair.
  ductile::vector<int> twos(4, 2);
  EXPECT_EQ(twos, (ductile::vector<int>{2, 2, 2, 2}));

  std::vector<std::string> words = {"one", "two", std::string(100, 'z')};
  ductile::vector<std::string> from_range(words.begin(), words.end());
  EXPECT_TRUE(std::equal(from_range.begin(), from_range.end(), words.begin(), words.end()));
  ductile::vector<std::string> from_input(InputIt<std::string>(words.data()), InputIt<std::string>(words.data() + 3));
  EXPECT_EQ(from_input, from_range);

  ductile::vector deduced(words.begin(), words.end());  // the deduction guide
  static_assert(std::is_same_v<decltype(deduced), ductile::vector<std::string>>);
  ductile::vector listed = {1, 2, 3};
  static_assert(std::is_same_v<decltype(listed), ductile::vector<int>>);

  ductile::vector<std::string> copy(from_range);
  EXPECT_EQ(copy, from_range);
  EXPECT_NE(copy.data(), from_range.data());
  const std::string* data = copy.data();
  ductile::vector<std::string> moved(std::move(copy));
  EXPECT_EQ(moved.data(), data);  // the buffer changes hands
  EXPECT_TRUE(copy.empty());      // NOLINT(bugprone-use-after-move): moved-from is empty, as documented
  EXPECT_EQ(copy.capacity(), 0u);
}

TEST(Vector, Assignment) {
  ductile::vector<std::string> a = {"x", "y"};
  ductile::vector<std::string> b(10, "long enough not to fit in the string itself");
  a = b;
  EXPECT_EQ(a, b);
  const ductile::vector<std::string>& itself = a;
  a = itself;
  EXPECT_EQ(a, b);
  const std::string* data = b.data();
  a = std::move(b);
  EXPECT_EQ(a.data(), data);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  a = {"p", "q", "r"};
  EXPECT_EQ(a, (ductile::vector<std::string>{"p", "q", "r"}));
  a.assign(2, "s");
  EXPECT_EQ(a, (ductile::vector<std::string>{"s", "s"}));
  a.assign({"t"});
  EXPECT_EQ(a, (ductile::vector<std::string>{"t"}));
}

TEST(Vector, ElementAccessAndIterators) {
  ductile::vector<int> v = {1, 2, 3, 4};
  const auto& c = v;
  EXPECT_EQ(v.front(), 1);
  EXPECT_EQ(c.back(), 4);
  EXPECT_EQ(c.at(2), 3);
  EXPECT_THROW(v.at(4), std::out_of_range);
  EXPECT_EQ(*v.rbegin(), 4);
  EXPECT_EQ(*(c.crend() - 1), 1);
  EXPECT_EQ(c.cend() - c.cbegin(), 4);
  EXPECT_EQ(c.data(), &v[0]);
  int sum = 0;
  for (int x : c) sum += x;
  EXPECT_EQ(sum, 10);
}

TEST(Vector, Comparisons) {
  ductile::vector<int> a = {1, 2, 3}, b = {1, 2, 4}, c = {1, 2};
  EXPECT_TRUE(a < b && a <= b && b > a && b >= a && a != b);
  EXPECT_TRUE(c < a && !(a < c) && a > c);
  EXPECT_TRUE(a == ductile::vector<int>({1, 2, 3}) && a <= a && a >= a);
}

// The capacity is the block's whole usable size in elements: no byte the
// allocator gave is left out.
TEST(Vector, CapacityIsTheUsableSize) {
  ductile::vector<uint64_t> v;
  for (uint64_t i = 0; i < 100000; i++) {
    v.push_back(i);
    const size_t usable = ductile_sallocx(v.data(), 0);
    ASSERT_EQ(v.capacity(), usable / sizeof(uint64_t)) << "at size " << v.size();
  }
  ductile::vector<char> r;
  r.reserve(1000);
  EXPECT_EQ(r.capacity(), ductile_nallocx(1000, 0));
}

TEST(Vector, OverAlignedElements) {
  ductile::vector<Wide> v;
  for (uint64_t i = 0; i < 70000; i++) {  // past the huge threshold (64-byte elements)
    v.emplace_back(i);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u) << "at size " << v.size();
  }
  EXPECT_EQ(v[69999].v, 69999u);
}

TEST(Vector, SizesPastMaxSizeThrowLengthError) {
  ductile::vector<uint64_t> v = {1, 2};
  EXPECT_EQ(v.max_size(), static_cast<size_t>(PTRDIFF_MAX) / 8);
  EXPECT_THROW(v.reserve(v.max_size() + 1), std::length_error);
  EXPECT_THROW(v.resize(v.max_size() + 1), std::length_error);
  EXPECT_THROW(v.insert(v.begin(), v.max_size(), 7), std::length_error);
  EXPECT_THROW(ductile::vector<uint64_t>(SIZE_MAX), std::length_error);
  EXPECT_EQ(v, (ductile::vector<uint64_t>{1, 2}));
}

// The allocator refusing: a size within max_size() that no block can have.
TEST(Vector, AllocationFailureThrowsBadAlloc) {
  ductile::vector<uint64_t> v = {1, 2};
  EXPECT_THROW(v.reserve(v.max_size()), std::bad_alloc);  // 8 EiB
  ductile::vector<std::string> s = {"a"};
  EXPECT_THROW(s.reserve(s.max_size()), std::bad_alloc);
  EXPECT_EQ(v, (ductile::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s, (ductile::vector<std::string>{"a"}));
}

TEST(Vector, ShrinkToFit) {
  ductile::vector<uint64_t> v(100000);
  v.resize(10);
  v.shrink_to_fit();
  EXPECT_EQ(v.capacity(), ductile_nallocx(10 * sizeof(uint64_t), 0) / sizeof(uint64_t));
  ductile::vector<std::string> s(1000, "s");
  s.resize(3);
  s.shrink_to_fit();
  EXPECT_LT(s.capacity(), 10u);
  EXPECT_EQ(s, (ductile::vector<std::string>{"s", "s", "s"}));
  s.clear();
  s.shrink_to_fit();  // an empty vector gives its buffer back
  EXPECT_EQ(s.capacity(), 0u);
  EXPECT_EQ(s.data(), nullptr);
}

TEST(Vector, MoveOnlyElements) {
  ductile::vector<std::unique_ptr<int>> v;
  for (int i = 0; i < 1000; i++) v.push_back(std::make_unique<int>(i));
  v.insert(v.begin() + 10, std::make_unique<int>(-1));
  v.emplace(v.begin(), new int(-2));
  v.erase(v.begin() + 5, v.begin() + 7);
  v.resize(2000);
  EXPECT_EQ(*v[0], -2);
  EXPECT_EQ(*v[9], -1);
  EXPECT_EQ(*v[10], 10);
  EXPECT_EQ(v[1999], nullptr);
  ductile::vector<std::unique_ptr<int>> w(std::move(v));
  EXPECT_EQ(*w[1], 0);
}

// As std::vector since C++17, the class can be named with an incomplete type.
struct Node {
  int value = 0;
  ductile::vector<Node> children;
};

TEST(Vector, IncompleteElementTypeInItsOwnDefinition) {
  Node root;
  for (int i = 0; i < 100; i++) root.children.push_back(Node{i, {}});
  root.children[7].children.resize(3);
  EXPECT_EQ(root.children[99].value, 99);
  EXPECT_EQ(root.children[7].children.size(), 3u);
}

// A relocatable buffer grows through the huge layer's resize (xallocx,
// then rallocx): in place, or its pages moved by mremap; never copied, never
// a new buffer. (Whether in place depends on the heap: a new block on
// recycled pages may have no headroom.)
template <class T>
void grows_through_the_huge_layer(size_t elements) {
  ductile::vector<T> v;
  v.reserve(elements);
  const size_t cap = v.capacity();
  const Growth before = growth();
  for (uint64_t i = 0; i < 2 * cap; i++) v.emplace_back(i);
  const Growth after = growth();
  EXPECT_GE(after.resized() - before.resized(), 1u);
  EXPECT_EQ(after.copies() - before.copies(), 0u);
  EXPECT_TRUE(v[cap + 12345] == make<T>(cap + 12345));
}

TEST(Vector, RelocatableBufferGrowsThroughTheHugeLayer) {
  grows_through_the_huge_layer<uint64_t>(4 << 20);  // 32 to 64 MiB
  grows_through_the_huge_layer<Boxed>(1 << 20);     // 8 to 16 MiB
}

// Elements that are not relocatable move into a new buffer, as in
// std::vector: the huge layer resizes nothing.
TEST(Vector, OtherElementsMoveToANewBuffer) {
  ductile::vector<Anchored> v;
  v.reserve(1 << 20);  // 16 MiB
  const Anchored* data = v.data();
  v.resize(v.capacity());
  const Growth before = growth();
  v.emplace_back(1);
  v.reserve(4 * v.capacity());
  const Growth after = growth();
  EXPECT_NE(v.data(), data);
  EXPECT_EQ(after.resized() - before.resized(), 0u);
  EXPECT_EQ(after.copies() - before.copies(), 0u);
  for (const Anchored& a : v) ASSERT_TRUE(a.ok());
}

}  // namespace
}  // namespace ductile::test
