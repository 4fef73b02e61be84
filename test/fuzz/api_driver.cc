// SPDX-License-Identifier: BSD-2-Clause
#include "fuzz/api_driver.h"

#include "config.h"  // DUCTILE_SANITIZE

#include <errno.h>
#include <pthread.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

#include "ductile/ductile.h"

namespace ductile::fuzz {
namespace {

constexpr size_t kSlots = 48;
// Live bytes at most: a run of 64 MiB blocks would otherwise fill memory.
constexpr size_t kMaxLive = size_t{256} << 20;
// Blocks up to this size are filled and checked whole; larger ones in three
// windows (start, middle, end) of kWindow bytes.
constexpr size_t kWhole = 64 * 1024;
constexpr size_t kWindow = 4096;
constexpr size_t kPtrdiffMax = static_cast<size_t>(PTRDIFF_MAX);

// The bytes, read front to back; zeroes once they run out.
class Input {
 public:
  Input(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool empty() const { return n_ == 0; }
  uint8_t u8() {
    if (n_ == 0) return 0;
    n_--;
    return *p_++;
  }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = v << 8 | u8();
    return v;
  }
  // 0 ... 64 MiB, heavy-tailed; 1 in 32 a size no allocator can serve.
  size_t size() {
    uint8_t b = u8();
    uint32_t r = u32();
    if (b < 96) return r % 65;
    if (b < 160) return r % 1025;
    if (b < 200) return r % (16 * 1024 + 1);
    if (b < 224) return r % (256 * 1024 + 1);
    if (b < 240) return r % (4 * 1024 * 1024 + 1);
    if (b < 248) return r % (64 * 1024 * 1024 + 1);
    static const size_t kBad[] = {SIZE_MAX, SIZE_MAX - 4095, kPtrdiffMax + 1, kPtrdiffMax, size_t{1} << 62,
                                  SIZE_MAX / 2};
    return kBad[r % (sizeof kBad / sizeof kBad[0])];
  }
  // A power of two from 1 to 4 MiB, or (1 in 16) one that is not.
  size_t align() {
    uint8_t b = u8();
    if (b >= 240) {
      static const size_t kOdd[] = {0, 3, 24, 48, 4095, size_t{1} << 63};
      return kOdd[b % (sizeof kOdd / sizeof kOdd[0])];
    }
    return size_t{1} << (b % 23);
  }
  // MALLOCX_* flags: zeroing, no thread cache, an alignment up to 32 MiB
  // (with `impossible`, now and then one of 2^40 or more, which no address
  // space holds). Sets *zero and *align to match.
  int flags(bool impossible, bool* zero, size_t* align) {
    uint8_t f = u8();
    int flags = 0;
    if (f & 1) flags |= MALLOCX_ZERO, *zero = true;
    if (f & 2) flags |= MALLOCX_TCACHE_NONE;
    if (f & 4) {
      unsigned lg = (f >> 3) % 26;
      if (impossible && f >= 0xf8) lg = 40 + f % 24;
      flags |= MALLOCX_LG_ALIGN(lg);
      *align = size_t{1} << lg;
    }
    return flags;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

bool is_pow2(size_t a) { return a != 0 && (a & (a - 1)) == 0; }

struct Block {
  void* p = nullptr;
  size_t size = 0;    // asked for
  size_t usable = 0;  // malloc_usable_size when made
  size_t align = 1;   // promised
  size_t asked = 1;   // the alignment asked for (1: none), which a sized free passes again
  uint8_t seed = 0;
};

class Driver {
 public:
  explicit Driver(Result& r) : r_(r) {}

  void step(Input& in);
  void free_all() {
    for (Block& b : slots_)
      if (b.p) release(b, 0);
  }

  // A thread takes blocks over (a free from another thread) and runs a few
  // calls of its own before it exits.
  static void* thread_body(void* arg);

 private:
  __attribute__((format(printf, 2, 3))) void fail(const char* fmt, ...) {
    if (!r_.ok) return;
    r_.ok = false;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(r_.what, sizeof r_.what, fmt, ap);
    va_end(ap);
  }

  static uint8_t at(const Block& b, size_t i) { return static_cast<uint8_t>(b.seed + i * 7 + (i >> 12)); }
  // Calls f(from, to) for each range of [0, size) that is filled and checked.
  template <typename F>
  static void windows(size_t size, F f) {
    if (size <= kWhole) {
      f(size_t{0}, size);
      return;
    }
    f(size_t{0}, kWindow);
    f(size / 2 - kWindow / 2, size / 2 + kWindow / 2);
    f(size - kWindow, size);
  }
  void fill(const Block& b) {
    auto* c = static_cast<uint8_t*>(b.p);
    windows(b.size, [&](size_t from, size_t to) {
      for (size_t i = from; i < to; i++) c[i] = at(b, i);
    });
  }
  // Checks the pattern of b's windows below `limit` (b.size by default).
  void check(const Block& b, const char* when, size_t limit = SIZE_MAX) {
    auto* c = static_cast<const uint8_t*>(b.p);
    windows(b.size, [&](size_t from, size_t to) {
      if (to > limit) to = limit;
      for (size_t i = from; i < to; i++)
        if (c[i] != at(b, i)) {
          fail("%s: block %p of %zu bytes: byte %zu is %u, not %u", when, b.p, b.size, i, c[i], at(b, i));
          return;
        }
    });
  }
  // The windows of a block of `size` bytes at p read as zero from `from` on.
  void check_zero(const void* p, size_t size, size_t from, const char* when) {
    auto* c = static_cast<const uint8_t*>(p);
    windows(size, [&](size_t a, size_t b) {
      for (size_t i = a < from ? from : a; i < b; i++)
        if (c[i] != 0) {
          fail("%s: block %p of %zu bytes: byte %zu is %u, not zero", when, p, size, i, c[i]);
          return;
        }
    });
  }
  // A new block: aligned, as large as asked, its usable size the same by
  // every function that reports it. Filled and recorded in `slot`.
  void accept(Block& slot, void* p, size_t size, size_t align, bool zero, const char* what, uint8_t seed) {
    size_t usable = ductile_malloc_usable_size(p);
    const size_t asked = align;
    // Without an alignment asked for: the usable size's own, up to 16.
    size_t natural = usable & (~usable + 1);
    if (natural > 16) natural = 16;
    if (align < natural) align = natural;
    if (reinterpret_cast<uintptr_t>(p) % align != 0) fail("%s(%zu): %p is not %zu-aligned", what, size, p, align);
    if (usable < size) fail("%s(%zu): usable size %zu", what, size, usable);
    if (ductile_sallocx(p, 0) != usable) fail("%s(%zu): sallocx %zu, usable %zu", what, size, ductile_sallocx(p, 0), usable);
    if (zero) check_zero(p, size, 0, what);
    slot = {p, size, usable, align, asked, seed};
    live_ += usable;
    fill(slot);
  }
  void release(Block& b, int how) {
    check(b, "before free");
    live_ -= b.usable;
    switch (how % 4) {
      case 0: ductile_free(b.p); break;
      case 1: ductile_dallocx(b.p, 0); break;
      // The size and alignment the block was made with, as jemalloc asks
      // (a hardened build checks them).
      case 2: ductile_sdallocx(b.p, b.size, b.asked > 1 ? MALLOCX_ALIGN(b.asked) : 0); break;
      case 3: ductile_dallocx(b.p, MALLOCX_TCACHE_NONE); break;
    }
    b = Block();
  }
  // A refusal: NULL with ENOMEM (or EINVAL for a bad alignment), and only
  // for a request that cannot be served.
  void refused(const char* what, size_t size, int err, bool impossible, bool bad_align) {
    r_.refused++;
    if (bad_align && err == EINVAL) return;
    if (err != ENOMEM) fail("%s(%zu): refused with errno %d", what, size, err);
    if (!impossible) fail("%s(%zu): refused a possible request", what, size);
  }
  Block* free_slot(Input& in) {
    size_t i = in.u8() % kSlots;
    for (size_t k = 0; k < kSlots; k++, i = (i + 1) % kSlots)
      if (slots_[i].p == nullptr) return &slots_[i];
    return nullptr;
  }
  Block* live_slot(Input& in) {
    size_t i = in.u8() % kSlots;
    for (size_t k = 0; k < kSlots; k++, i = (i + 1) % kSlots)
      if (slots_[i].p != nullptr) return &slots_[i];
    return nullptr;
  }
  // Sizes past PTRDIFF_MAX never succeed; smaller ones always should here
  // (the live bytes are bounded) -- except a size beyond what the address
  // space can hold at the alignment asked.
  static bool impossible(size_t size, size_t align = 1) {
    return size > (size_t{1} << 46) || align >= (size_t{1} << 40);
  }

  void allocate(Input& in);
  void resize(Input& in);

  Result& r_;
  Block slots_[kSlots];
  size_t live_ = 0;
  uint8_t seed_ = 1;
};

void Driver::allocate(Input& in) {
  Block* slot = free_slot(in);
  uint8_t op = in.u8() % 11;
  size_t size = in.size();
  if (slot == nullptr || (live_ + (size < kMaxLive ? size : 0) > kMaxLive && !impossible(size))) return;
  size_t align = 1;
  bool zero = false;
  bool bad_align = false;
  const char* what = "malloc";
  void* p = nullptr;
  errno = 0;
  int err = 0;
  switch (op) {
    case 0: p = ductile_malloc(size); break;
    case 1: {
      // calloc: n * m, sometimes overflowing.
      size_t m = (in.u8() & 7) + 1;
      size_t n = size / m;
      if (in.u8() >= 240) n = SIZE_MAX / m + 1;
      what = "calloc";
      p = ductile_calloc(n, m);
      size_t total;
      if (__builtin_mul_overflow(n, m, &total)) {
        if (p != nullptr) fail("calloc(%zu, %zu): overflow gave %p", n, m, p);
        else refused(what, SIZE_MAX, errno, true, false);
        return;
      }
      size = total;
      zero = true;
      break;
    }
    case 2: what = "memalign"; align = in.align(); p = ductile_memalign(align, size); bad_align = align > (SIZE_MAX / 2 + 1); {
        size_t a = 1;
        while (a < align && a != 0) a <<= 1;
        align = a ? a : 1;
      }
      break;
    case 3: {
      what = "posix_memalign";
      align = in.align();
      bad_align = !is_pow2(align) || align % sizeof(void*) != 0;
      void* out = reinterpret_cast<void*>(0x1);
      err = ductile_posix_memalign(&out, align, size);
      if (err != 0) {
        if (out != reinterpret_cast<void*>(0x1)) fail("posix_memalign: wrote %p on error %d", out, err);
        refused(what, size, err, impossible(size, align), bad_align);
        return;
      }
      if (bad_align) fail("posix_memalign(%zu): accepted alignment %zu", size, align);
      p = out;
      break;
    }
    case 4: what = "aligned_alloc"; align = in.align(); bad_align = !is_pow2(align); p = ductile_aligned_alloc(align, size); break;
    case 5: what = "valloc"; align = 4096; p = ductile_valloc(size); break;
    case 6: what = "pvalloc"; align = 4096; p = ductile_pvalloc(size); break;
    case 7: case 8: case 9: {
      what = "mallocx";
      int flags = in.flags(true, &zero, &align);
      size_t n = ductile_nallocx(size, flags);
      p = size == 0 ? nullptr : ductile_mallocx(size, flags);  // size 0 is undefined for mallocx
      if (size == 0) return;
      if (p != nullptr && n != ductile_malloc_usable_size(p))
        fail("mallocx(%zu, %#x): usable %zu, nallocx %zu", size, flags, ductile_malloc_usable_size(p), n);
      if (p == nullptr && n != 0 && !impossible(size, align)) fail("mallocx(%zu, %#x): NULL, nallocx %zu", size, flags, n);
      break;
    }
    case 10:
#ifdef DUCTILE_SANITIZE
      p = ductile_malloc(size);  // operator new is the sanitizer's there
#else
      p = ::operator new(size, std::nothrow);
      what = "new(nothrow)";
#endif
      break;
  }
  if (op != 3) err = errno;
  r_.calls++;
  if (p == nullptr) {
    refused(what, size, err, impossible(size, align) || (op == 6 && size > SIZE_MAX - 4096), bad_align);
    return;
  }
  if (bad_align && op == 4) fail("aligned_alloc(%zu): accepted alignment %zu", size, align);
  if (op == 6) size = size == 0 ? 4096 : (size + 4095) & ~size_t{4095};
  accept(*slot, p, size, align, zero, what, seed_++);
}

void Driver::resize(Input& in) {
  Block* b = live_slot(in);
  uint8_t op = in.u8() % 6;
  size_t size = in.size();
  if (b == nullptr) return;
  if (live_ + (size < kMaxLive ? size : 0) > kMaxLive && !impossible(size)) return;
  check(*b, "before resize");
  r_.calls++;
  errno = 0;
  const size_t old_usable = b->usable;
  Block nb = *b;
  void* p = nullptr;
  bool zero_tail = false;
  size_t align = 1;
  const char* what = "realloc";
  switch (op) {
    case 0:
      if (size == 0) {  // realloc(p, 0) frees p
        live_ -= b->usable;
        if (ductile_realloc(b->p, 0) != nullptr) fail("realloc(p, 0) did not return NULL");
        *b = Block();
        return;
      }
      p = ductile_realloc(b->p, size);
      break;
    case 1: {
      what = "reallocarray";
      size_t m = (in.u8() & 3) + 1;
      size_t n = size / m + (size % m != 0);
      if (in.u8() >= 240) n = SIZE_MAX / m + 1;
      size_t total;
      if (__builtin_mul_overflow(n, m, &total)) {
        if (ductile_reallocarray(b->p, n, m) != nullptr) fail("reallocarray(%zu, %zu): overflow accepted", n, m);
        else refused(what, SIZE_MAX, errno, true, false);
        check(*b, "after a refused reallocarray");
        return;
      }
      if (total == 0) return;
      size = total;
      p = ductile_reallocarray(b->p, n, m);
      break;
    }
    case 2: case 3: {
      what = "rallocx";
      if (size == 0) size = 1;
      int flags = in.flags(false, &zero_tail, &align);
      p = ductile_rallocx(b->p, size, flags);
      if (p != nullptr && ductile_malloc_usable_size(p) != ductile_nallocx(size, flags))
        fail("rallocx(%zu, %#x): usable %zu, nallocx %zu", size, flags, ductile_malloc_usable_size(p),
             ductile_nallocx(size, flags));
      break;
    }
    case 4: {
      // xallocx: in place or not at all; never moves, never fails.
      size_t extra = in.u8() % 2 ? in.size() % (1 << 20) : 0;
      if (size == 0) size = 1;
      int flags = in.u8() % 2 ? MALLOCX_ZERO : 0;
      size_t got = ductile_xallocx(b->p, size, extra, flags);
      size_t usable = ductile_malloc_usable_size(b->p);
      if (got != usable) fail("xallocx(%zu, %zu): returned %zu, usable %zu", size, extra, got, usable);
      if (got < size && got != old_usable)
        fail("xallocx(%zu, %zu): neither resized nor left alone (%zu, was %zu)", size, extra, got, old_usable);
      // The old contents that still fit are kept.
      size_t keep = b->size < got ? b->size : got;
      check(*b, "after xallocx", keep);
      if ((flags & MALLOCX_ZERO) && got > old_usable) check_zero(b->p, got, old_usable, "xallocx(ZERO)");
      live_ = live_ - b->usable + got;
      b->usable = got;
      b->size = got;
      fill(*b);
      return;
    }
    case 5: {
      // malloc_usable_size, sallocx and nallocx agree on a live block.
      size_t u = ductile_malloc_usable_size(b->p);
      if (u != b->usable || ductile_sallocx(b->p, 0) != u)
        fail("usable size of %p changed: %zu, then %zu (sallocx %zu)", b->p, b->usable, u, ductile_sallocx(b->p, 0));
      return;
    }
  }
  if (p == nullptr) {
    refused(what, size, errno, impossible(size, align), false);
    check(*b, "after a refused resize");
    return;
  }
  nb.p = p;
  size_t keep = b->size < size ? b->size : size;
  check(nb, what, keep);
  if (zero_tail && size > old_usable) check_zero(p, size, old_usable, "rallocx(ZERO)");
  live_ -= b->usable;
  *b = Block();
  accept(*b, p, size, align, false, what, nb.seed);
  // accept() refilled the windows of the new size with the same seed, so the
  // kept bytes still match.
}

struct ThreadArg {
  Block taken[4];
  Result* result;
};

void* Driver::thread_body(void* arg) {
  auto* t = static_cast<ThreadArg*>(arg);
  Result local;
  Driver d(local);
  for (Block& b : t->taken) {
    if (b.p == nullptr) continue;
    d.check(b, "freed by another thread");
    ductile_free(b.p);
  }
  // A few blocks of its own, left in its cache when it exits.
  for (size_t i = 0; i < 16; i++) {
    void* p = ductile_malloc(16 + i * 40);
    if (p == nullptr) d.fail("malloc(%zu) in a thread: NULL", 16 + i * 40);
    ductile_free(p);
  }
  if (!local.ok && t->result->ok) *t->result = local;
  return nullptr;
}

void Driver::step(Input& in) {
  uint8_t op = in.u8();
  if (op < 110) {
    allocate(in);
  } else if (op < 170) {
    resize(in);
  } else if (op < 240) {
    if (Block* b = live_slot(in)) {
      r_.calls++;
      release(*b, in.u8());
    }
  } else if (op < 244) {
    r_.calls++;
    switch (op % 4) {
      case 0: (void)ductile_malloc_trim(0); break;
      case 1: (void)ductile_mallctl("arena.0.purge", nullptr, nullptr, nullptr, 0); break;
      case 2: (void)ductile_mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0); break;
      case 3: (void)ductile_trim(); break;
    }
    for (Block& b : slots_)
      if (b.p) check(b, "after trim");
  } else if (op < 248) {
    // A thread takes up to four blocks over, frees them and exits.
    r_.calls++;
    ThreadArg t{};
    t.result = &r_;
    for (Block& b : t.taken)
      if (Block* s = live_slot(in)) {
        b = *s;
        live_ -= s->usable;
        *s = Block();
      }
    pthread_t th;
    if (pthread_create(&th, nullptr, &Driver::thread_body, &t) != 0) {
      for (Block& b : t.taken)
        if (b.p) ductile_free(b.p);
      return;
    }
    pthread_join(th, nullptr);
  } else {
    // Null and foreign pointers have no usable size; free(NULL) does nothing.
    r_.calls++;
    ductile_free(nullptr);
    if (ductile_malloc_usable_size(nullptr) != 0) fail("malloc_usable_size(NULL) != 0");
    static int on_stack_is_not_ours;
    if (ductile_malloc_usable_size(&on_stack_is_not_ours) != 0) fail("malloc_usable_size of a static: not 0");
  }
}

}  // namespace

Result run(const uint8_t* data, size_t size) noexcept {
  Result r;
  Driver d(r);
  Input in(data, size);
  while (!in.empty() && r.ok) d.step(in);
  d.free_all();
  return r;
}

}  // namespace ductile::fuzz
