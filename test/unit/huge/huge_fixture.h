/* SPDX-License-Identifier: BSD-2-Clause */
// The fixture of the huge layer's tests: a huge layer over a chunk layer on the fake kernel,
// byte patterns, and the checks of the accounting.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "huge/huge.h"
#include "support/fake_kernel.h"
#include "support/layers.h"

namespace ductile::test {

inline constexpr size_t kMiB = size_t{1} << 20;
inline constexpr int kMadvHugepage = 14;  // MADV_HUGEPAGE

inline void fill(void* p, size_t n, unsigned char seed) { std::memset(p, seed, n); }

// Every 512th byte and the last: enough to see a lost, moved or zeroed page.
inline bool holds(const void* p, size_t n, unsigned char seed) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; i += 512)
    if (c[i] != seed) return false;
  return n == 0 || c[n - 1] == seed;
}

inline bool all_zero(const void* p, size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; i++)
    if (c[i] != 0) return false;
  return true;
}

class HugeTest : public test::ChunkLayerTest {
 protected:
  void SetUp() override { make(); }

  // A fresh stack of layers (the kernel's settings are read by the Os).
  void make(size_t reservation = 256 * kMiB, huge::Options ho = huge::Options(), size_t remapped_bound = 1024) {
    huge_.reset();
    kernel_.clear_failures();
    make_chunks(reservation, kOneSecond, remapped_bound);
    huge_ = std::make_unique<huge::HugeLayer>(*chunks_, ho);
  }

  chunk::Extent* extent(void* p) {
    chunk::Extent* e = chunks_->lookup(p);
    EXPECT_NE(e, nullptr);
    if (e != nullptr) {
      EXPECT_EQ(e->kind, chunk::ExtentKind::kHuge);
      EXPECT_EQ(e->base, addr(p));
    }
    return e;
  }
  void* alloc(size_t size, size_t align = kPage, bool zero = false) {
    void* p = huge_->alloc(size, align, zero);
    EXPECT_NE(p, nullptr);
    return p;
  }
  void free(void* p) { huge_->free(extent(p)); }
  uint64_t growth(huge::GrowthPath p) { return huge_->stats().growth[static_cast<size_t>(p)]; }
  uint64_t syscalls() { return os_->counters().total(); }
  uint64_t calls(os::Call c) { return os_->counters().get(c); }

  // Accounting that must hold whenever no call is in flight.
  void expect_consistent() {
    chunk::ChunkStats c = chunks_->stats();
    EXPECT_EQ(c.active + c.dirty + c.clean, c.reserved);
    EXPECT_EQ(huge_->stats().span_bytes, c.active);  // only the huge layer uses these chunks
  }
  void expect_empty() {
    huge::HugeStats h = huge_->stats();
    EXPECT_EQ(h.active_bytes, 0u);
    EXPECT_EQ(h.span_bytes, 0u);
    EXPECT_EQ(h.allocs, h.frees);
    EXPECT_EQ(chunks_->stats().active, 0u);
    expect_consistent();
  }

  // Makes whatever follows e's span busy, so that it cannot grow in place:
  // a page of ours taken from the free extent there, or a foreign page
  // mapped there when the address is not ours. Undo with unblock() before
  // checking the accounting.
  struct Blocker {
    chunk::Extent* ours = nullptr;
    void* foreign = nullptr;
  };
  Blocker block_after(const chunk::Extent* e) {
    Blocker b;
    chunk::Extent* n = chunks_->lookup(ptr(e->end()));
    if (n == nullptr) {
      b.foreign = ::mmap(ptr(e->end()), kPage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      EXPECT_EQ(b.foreign, ptr(e->end()));
    } else if (n->is_free()) {
      b.ours = chunks_->alloc_at(e->end(), kPage).extent;
      EXPECT_NE(b.ours, nullptr);
    }
    return b;
  }
  // Whether nothing is mapped at [a, a+len): the fixed-map path needs that
  // past the last reservation, which holds unless something (a sanitizer's
  // shadow memory, say) sits at the chunk layer's hint.
  static bool unmapped(uintptr_t a, size_t len) {
    void* p = ::mmap(ptr(a), len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) return false;
    ::munmap(p, len);
    return p == ptr(a);
  }
  void unblock(Blocker b) {
    if (b.ours) chunks_->free(b.ours);
    if (b.foreign) ::munmap(b.foreign, kPage);
  }

  std::unique_ptr<huge::HugeLayer> huge_;
};

inline std::vector<test::SysCall> advice_calls(const FakeKernel& k) {
  std::vector<test::SysCall> v;
  for (const auto& c : k.calls())
    if (c.sys == Sys::kMadvise && c.arg == kMadvHugepage) v.push_back(c);
  return v;
}

inline huge::Options guarded() {
  huge::Options o;
  o.guard = true;
  return o;
}

}  // namespace ductile::test
