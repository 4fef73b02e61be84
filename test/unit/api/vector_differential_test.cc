// SPDX-License-Identifier: BSD-2-Clause
// ductile::vector against std::vector: the same random operations on both,
// from fixed seeds, the contents compared after each; for trivially copyable
// elements, relocatable ones, ones that are not (std::string, and a type that
// knows its own address), and over-aligned ones. Among the operations are
// those whose argument is one of the vector's own elements, which growth
// moves.
#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test/unit/api/vector_helpers.h"

namespace ductile::test {
namespace {

template <class T>
::testing::AssertionResult same(const ductile::vector<T>& d, const std::vector<T>& s) {
  if (d.size() != s.size())
    return ::testing::AssertionFailure() << "size " << d.size() << ", std::vector's " << s.size();
  if (d.empty() != s.empty()) return ::testing::AssertionFailure() << "empty() " << d.empty();
  if (d.capacity() < d.size()) return ::testing::AssertionFailure() << "capacity " << d.capacity() << " < size";
  if (d.end() - d.begin() != static_cast<std::ptrdiff_t>(d.size()))
    return ::testing::AssertionFailure() << "end() - begin() is not size()";
  if (d.data() != nullptr && reinterpret_cast<uintptr_t>(d.data()) % alignof(T) != 0)
    return ::testing::AssertionFailure() << "data() " << d.data() << " is not aligned to " << alignof(T);
  for (size_t i = 0; i < s.size(); i++)
    if (!(d[i] == s[i])) return ::testing::AssertionFailure() << "element " << i << ": " << d[i] << ", std::vector's " << s[i];
  if (!std::equal(d.rbegin(), d.rend(), s.rbegin(), s.rend()))
    return ::testing::AssertionFailure() << "the reverse iterators differ";
  return ::testing::AssertionSuccess();
}

// One run: `ops` random operations on two pairs of vectors (a second pair for
// swap, assignment and comparison), sizes kept about `most`.
template <class T>
void run(uint64_t seed, int ops, size_t most) {
  std::mt19937_64 rng(seed);
  auto below = [&rng](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  auto value = [&rng] { return make<T>(rng() % 1000); };
  ductile::vector<T> d, d2;
  std::vector<T> s, s2;
  std::vector<T> src;  // a range to insert or assign from
  for (int op = 0; op < ops; op++) {
    const size_t n = s.size();
    const bool large = n > most;
    const size_t pos = below(n + 1);  // an insertion point
    const size_t at = below(n);       // an element, when n > 0
    const size_t count = below(most / 8 + 2);
    src.clear();
    for (size_t k = below(most / 8 + 2); k > 0; k--) src.push_back(value());
    int kind = static_cast<int>(rng() % 34);
    if (large && kind < 20) kind = 20 + kind % 3;  // shrink back: pop, erase, clear
    std::ostringstream what;
    switch (kind) {
      case 0: case 1: {
        T v = value();
        d.push_back(v);
        s.push_back(v);
        what << "push_back(const T&)";
        break;
      }
      case 2: {
        T v = value();
        T w = v;
        d.push_back(std::move(v));
        s.push_back(std::move(w));
        what << "push_back(T&&)";
        break;
      }
      case 3: {
        T v = value();
        EXPECT_EQ(d.emplace_back(v), s.emplace_back(v));
        what << "emplace_back";
        break;
      }
      case 4: {
        T v = value();
        auto i = d.insert(d.begin() + pos, v);
        s.insert(s.begin() + pos, v);
        EXPECT_EQ(i - d.begin(), static_cast<std::ptrdiff_t>(pos));
        what << "insert(" << pos << ", v)";
        break;
      }
      case 5: {
        T v = value();
        auto i = d.insert(d.cbegin() + pos, count, v);
        s.insert(s.cbegin() + pos, count, v);
        EXPECT_EQ(i - d.begin(), static_cast<std::ptrdiff_t>(pos));
        what << "insert(" << pos << ", " << count << ", v)";
        break;
      }
      case 6: {
        auto i = d.insert(d.begin() + pos, src.begin(), src.end());
        s.insert(s.begin() + pos, src.begin(), src.end());
        EXPECT_EQ(i - d.begin(), static_cast<std::ptrdiff_t>(pos));
        what << "insert(" << pos << ", forward range of " << src.size() << ")";
        break;
      }
      case 7: {
        InputIt<T> f(src.data()), l(src.data() + src.size());
        auto i = d.insert(d.begin() + pos, f, l);
        s.insert(s.begin() + pos, f, l);
        EXPECT_EQ(i - d.begin(), static_cast<std::ptrdiff_t>(pos));
        what << "insert(" << pos << ", input range of " << src.size() << ")";
        break;
      }
      case 8: {
        T a = value(), b = value();
        d.insert(d.begin() + pos, {a, b});
        s.insert(s.begin() + pos, {a, b});
        what << "insert(" << pos << ", {a, b})";
        break;
      }
      case 9: {
        T v = value();
        auto i = d.emplace(d.begin() + pos, v);
        s.emplace(s.begin() + pos, v);
        EXPECT_EQ(i - d.begin(), static_cast<std::ptrdiff_t>(pos));
        what << "emplace(" << pos << ")";
        break;
      }
      case 10: {  // one of its own elements, which growth moves
        if (n == 0) continue;
        d.push_back(d[at]);
        s.push_back(s[at]);
        what << "push_back(own element " << at << ")";
        break;
      }
      case 11: {
        if (n == 0) continue;
        d.push_back(std::move(d[at]));
        s.push_back(std::move(s[at]));
        what << "push_back(move(own element " << at << "))";
        break;
      }
      case 12: {
        if (n == 0) continue;
        d.insert(d.begin() + pos, d[at]);
        s.insert(s.begin() + pos, s[at]);
        what << "insert(" << pos << ", own element " << at << ")";
        break;
      }
      case 13: {
        if (n == 0) continue;
        d.insert(d.begin() + pos, count, d[at]);
        s.insert(s.begin() + pos, count, s[at]);
        what << "insert(" << pos << ", " << count << ", own element " << at << ")";
        break;
      }
      case 14: {
        if (n == 0) continue;
        d.emplace(d.begin() + pos, d[at]);
        s.emplace(s.begin() + pos, s[at]);
        what << "emplace(" << pos << ", own element " << at << ")";
        break;
      }
      case 15: {
        if (n == 0) continue;
        const size_t to = n + count;
        d.resize(to, d[at]);
        s.resize(to, s[at]);
        what << "resize(" << to << ", own element " << at << ")";
        break;
      }
      case 16: {
        if (n == 0) continue;
        const size_t to = below(2 * n + 2);
        d.assign(to, d[at]);
        s.assign(to, s[at]);
        what << "assign(" << to << ", own element " << at << ")";
        break;
      }
      case 17: {
        const size_t to = below(2 * n + 8);
        d.resize(to);
        s.resize(to);
        what << "resize(" << to << ")";
        break;
      }
      case 18: {
        const size_t to = below(2 * n + 8);
        T v = value();
        d.resize(to, v);
        s.resize(to, v);
        what << "resize(" << to << ", v)";
        break;
      }
      case 19: {
        const size_t to = below(2 * most);
        d.reserve(to);
        s.reserve(to);
        EXPECT_GE(d.capacity(), to);
        what << "reserve(" << to << ")";
        break;
      }
      case 20: {
        if (n == 0) continue;
        d.pop_back();
        s.pop_back();
        what << "pop_back";
        break;
      }
      case 21: {
        if (n == 0) continue;
        const size_t last = at + below(n - at + 1);
        auto i = d.erase(d.begin() + at, d.begin() + last);
        s.erase(s.begin() + at, s.begin() + last);
        EXPECT_EQ(i - d.begin(), static_cast<std::ptrdiff_t>(at));
        what << "erase(" << at << ", " << last << ")";
        break;
      }
      case 22: {
        if (rng() % 4 == 0) {
          d.clear();
          s.clear();
          what << "clear";
        } else {
          if (n == 0) continue;
          auto i = d.erase(d.cbegin() + at);
          s.erase(s.cbegin() + at);
          EXPECT_EQ(i - d.begin(), static_cast<std::ptrdiff_t>(at));
          what << "erase(" << at << ")";
        }
        break;
      }
      case 23: {
        d.shrink_to_fit();
        s.shrink_to_fit();
        what << "shrink_to_fit";
        if (d.empty()) {
          EXPECT_EQ(d.capacity(), 0u);
        }
        break;
      }
      case 24: {
        const size_t to = below(2 * n + 8);
        T v = value();
        d.assign(to, v);
        s.assign(to, v);
        what << "assign(" << to << ", v)";
        break;
      }
      case 25: {
        d.assign(src.begin(), src.end());
        s.assign(src.begin(), src.end());
        what << "assign(forward range of " << src.size() << ")";
        break;
      }
      case 26: {
        InputIt<T> f(src.data()), l(src.data() + src.size());
        d.assign(f, l);
        s.assign(f, l);
        what << "assign(input range of " << src.size() << ")";
        break;
      }
      case 27: {
        if (rng() % 2) {
          d2 = d;
          s2 = s;
          what << "copy-assigned to the second";
        } else {
          ductile::vector<T> copy(d);
          d = std::move(copy);
          ductile::vector<T> moved(std::move(d));
          EXPECT_TRUE(d.empty());
          d = moved;
          what << "copied, moved and copied back";
        }
        break;
      }
      case 28: {
        if (rng() % 2) {
          d.swap(d2);
        } else {
          using std::swap;
          swap(d, d2);
        }
        s.swap(s2);
        what << "swapped with the second";
        break;
      }
      case 29: {
        if (n == 0) continue;
        T v = value();
        d[at] = v;
        s[at] = v;
        d.at(at) = d.front();
        s.at(at) = s.front();
        EXPECT_EQ(d.back(), s.back());
        what << "written at " << at;
        break;
      }
      case 30: {
        EXPECT_THROW(d.at(n), std::out_of_range);
        EXPECT_THROW(static_cast<const ductile::vector<T>&>(d).at(n + 3), std::out_of_range);
        what << "at(size()) throws";
        break;
      }
      case 31: {
        T a = value(), b = value();
        if (rng() % 2) {
          d2 = {a, b};
          s2 = {a, b};
        } else {
          d2.assign({b, a, b});
          s2.assign({b, a, b});
        }
        what << "the second assigned a list";
        break;
      }
      case 32: {
        if (n > 0 && rng() % 2) {
          d2 = d;
          s2 = s;
          const size_t k = below(n);
          d2[k] = value();
          s2[k] = d2[k];
        }
        EXPECT_EQ(d == d2, s == s2);
        EXPECT_EQ(d != d2, s != s2);
        EXPECT_EQ(d < d2, s < s2);
        EXPECT_EQ(d <= d2, s <= s2);
        EXPECT_EQ(d > d2, s > s2);
        EXPECT_EQ(d >= d2, s >= s2);
        what << "compared with the second";
        break;
      }
      default: {
        ductile::vector<T> made(src.begin(), src.end());
        d.insert(d.end(), made.begin(), made.end());
        s.insert(s.end(), src.begin(), src.end());
        what << "appended a vector made from a range of " << src.size();
        break;
      }
    }
    ASSERT_TRUE(same(d, s)) << "seed " << seed << ", operation " << op << ": " << what.str();
    ASSERT_TRUE(same(d2, s2)) << "seed " << seed << ", operation " << op << " (second pair): " << what.str();
  }
}

template <class T>
class VectorDifferential : public ::testing::Test {};
using ElementTypes = ::testing::Types<uint64_t, std::string, Boxed, Anchored, Wide>;
TYPED_TEST_SUITE(VectorDifferential, ElementTypes);

TYPED_TEST(VectorDifferential, RandomOperationsMatchStdVector) {
  for (uint64_t seed : {1, 2, 3, 4, 5, 6, 7, 8}) {
    run<TypeParam>(seed, 5000, 200);
    if (this->HasFatalFailure()) return;
  }
}

// Past the huge threshold (2 MiB: 262 144 uint64_t): the buffer grows and
// shrinks through the huge layer, and insertions and erasures move its tail.
TEST(VectorDifferentialHuge, RandomOperationsMatchStdVector) {
  for (uint64_t seed : {11, 12}) {
    run<uint64_t>(seed, 150, 400000);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace ductile::test
