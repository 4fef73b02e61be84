// SPDX-License-Identifier: BSD-2-Clause
// The central bins (small/bin.h): slabs and their headers, fill and flush,
// empty slabs, the slab-header pool, and hardened mode's freed mark.
#include "small/bin.h"

#include <cstring>
#include <new>

#include "base/fork_gate.h"
#include "small/seal.h"
#include "small/thread_cache.h"

namespace ductile::small {

uint64_t g_freed_key[2] = {0, 0};

void set_freed_key(uint64_t seed) noexcept {
  // Two keys from one seed, each through its own splitmix64 step.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  g_freed_key[0] = mix(seed);
  g_freed_key[1] = mix(seed ^ 0x6a09e667f3bcc909ull);
}

void freed_block_changed(const void* p) noexcept { fatal_pointer("double free or write after free detected", p); }
void freed_twice(const void* p) noexcept { fatal_pointer("free(): double free detected", p); }

void free_block_overrun(const void* p) noexcept { fatal_pointer("malloc(): buffer overflow into a free block detected", p); }

namespace {

// A never-used object leaves its bin: as if freed, and sealed.
void mark_unused(void* p, size_t block) {
  const uintptr_t mark = freed_mark(p);
  mark_word(p) = mark;
  seal_unused(p, block, seal_key_of(mark));
}

// The words from the mark's to the seal word's, at most kFreedFillMax bytes.
size_t filled_words(size_t block) {
  return (block - kSealSize < kFreedFillMax ? block - kSealSize : kFreedFillMax) / sizeof(uint64_t);
}

}  // namespace

void fill_freed(void* p, size_t block) noexcept {
  auto* w = static_cast<uint64_t*>(p);
  const size_t n = filled_words(block);
  for (size_t i = 1; i < n; i++) w[i] = kFreedFill;
}

void take_filled(void* p, size_t block) noexcept {
  const auto* w = static_cast<const uint64_t*>(p);
  const size_t n = filled_words(block);
  uint64_t changed = 0;
  for (size_t i = 1; i < n; i++) changed |= w[i] ^ kFreedFill;
  if (changed != 0) freed_block_changed(p);
}

namespace {
Mutex g_pool_lock;
Slab* g_pool[kMaxBitmapWords + 1] = {};
}  // namespace

Slab* SlabPool::get(chunk::MetaAlloc& meta, size_t words) noexcept {
  {
    LockGuard g(g_pool_lock);
    if (Slab* s = g_pool[words]) {
      g_pool[words] = s->next;
      // A header is put back only with its slab empty, so its bitmap is clear.
      return new (s) Slab();
    }
  }
  void* mem = meta.alloc(sizeof(Slab) + words * sizeof(uint64_t), alignof(Slab));
  return mem ? new (mem) Slab() : nullptr;
}

void SlabPool::put(Slab* s, size_t words) noexcept {
  LockGuard g(g_pool_lock);
  s->next = g_pool[words];
  g_pool[words] = s;
}

void SlabPool::prefork() noexcept { g_pool_lock.lock(); }
void SlabPool::postfork_parent() noexcept { g_pool_lock.unlock(); }
void SlabPool::postfork_child() noexcept { g_pool_lock.reinit_after_fork(); }

void Bin::init(size_t cls, SlabArena* arena, bool hardened) noexcept {
  cls_ = static_cast<uint32_t>(cls);
  size_ = kClasses.size[cls];
  // Hardened mode links no freed object through its memory: a write after
  // free cannot redirect a later allocation, and a double free is a bit
  // already set.
  hardened_ = hardened;
  words_ = hardened ? (kClasses.objects_per_slab[cls] + 63u) / 64u : kClasses.bitmap_words[cls];
  // For an offset q * size_: q * size_ * magic = q * 2^32 + q * r with
  // r < size_, so the shift gives q exactly while q * r < 2^32 -- slabs hold
  // at most 8192 objects and size_ <= 16 KiB.
  div_magic_ = static_cast<uint32_t>(((uint64_t{1} << 32) + size_ - 1) / size_);
  arena_ = arena;
}

void Bin::link(Slab* s, List l) noexcept {
  s->list = l;
  s->prev = nullptr;
  s->next = nullptr;
  Slab** head = l == kPartial ? &partial_ : l == kEmpty ? &empty_ : nullptr;
  if (head == nullptr) return;  // full slabs are on no list: a free finds them through the page map
  s->next = *head;
  if (*head) (*head)->prev = s;
  *head = s;
  if (l == kEmpty) {
    __atomic_store_n(&nempty_, nempty_ + 1, __ATOMIC_RELAXED);  // (decay peeks without the lock)
    if (empty_tail_ == nullptr) empty_tail_ = s;
  }
}

void Bin::unlink(Slab* s) noexcept {
  if (s->list == kFull) return;
  Slab** head = s->list == kPartial ? &partial_ : &empty_;
  if (s->list == kEmpty) {
    __atomic_store_n(&nempty_, nempty_ - 1, __ATOMIC_RELAXED);
    if (empty_tail_ == s) empty_tail_ = s->prev;
  }
  if (s->prev) s->prev->next = s->next;
  else *head = s->next;
  if (s->next) s->next->prev = s->prev;
  s->prev = s->next = nullptr;
}

Slab* Bin::new_slab() noexcept {
  Lent a = arena_->alloc(kClasses.slab_pages[cls_]);
  if (a.extent == nullptr) return nullptr;
  Slab* s = SlabPool::get(arena_->chunks().meta(), words_);
  chunk::Extent* e = a.extent;
  e->kind = chunk::ExtentKind::kSlab;
  e->size_class = static_cast<uint16_t>(cls_);
  e->usable = size_;
  e->owner = s;
  // Every page, tagged with the class (and numbered, in hardened builds):
  // free() needs neither the extent nor the header.
  if (s == nullptr || !arena_->chunks().map_interior(e, free_tag(cls_), kSlabPageTagStep)) {
    if (s) SlabPool::put(s, words_);
    e->kind = chunk::ExtentKind::kNone;
    e->owner = nullptr;
    arena_->free(&a, 1);
    return nullptr;
  }
  s->extent = e;
  s->bin = this;
  s->region = a.region;
  s->base = e->base;
  s->nobjs = kClasses.objects_per_slab[cls_];
  s->nfree = s->nobjs;
  s->cls = static_cast<uint16_t>(cls_);
  slabs_++;
  slab_allocs_++;
  free_objects_ += s->nfree;
  return s;
}

Lent Bin::take_empty(Slab* s) noexcept {
  unlink(s);
  Lent out{s->extent, s->region};
  chunk::Extent* e = s->extent;
  e->kind = chunk::ExtentKind::kNone;
  e->owner = nullptr;
  free_objects_ -= s->nfree;
  slabs_--;
  slab_returns_++;
  if (hardened_) start_over(s);  // kept its freed objects (settle): the pool's headers are fresh
  SlabPool::put(s, words_);
  return out;
}

// Freed objects off the slab's free list.
size_t Bin::fill_list(Slab* s, void** out, size_t n) noexcept {
  size_t got = 0;
  while (got < n && s->free_list != nullptr) {
    void* p = s->free_list;
    s->free_list = *static_cast<void**>(p);
    out[got++] = p;
  }
  return got;
}

// Freed objects (set bits, lowest first): address order, and no object is
// read.
size_t Bin::fill_bitmap(Slab* s, void** out, size_t n) noexcept {
  size_t got = 0;
  size_t freed = s->nfree - (s->nobjs - s->bump);  // set bits
  if (freed != 0) {
    uint64_t* bits = s->bits();
    size_t w = s->first_word;
    const size_t wsize = size_t{64} * size_;
    while (got < n) {
      uint64_t word = bits[w];
      if (word == 0) {
        w++;
        continue;
      }
      uintptr_t base = s->base + w * wsize;
      do {
        out[got++] = ptr(base + static_cast<size_t>(__builtin_ctzll(word)) * size_);
        word &= word - 1;
      } while (word != 0 && got < n);
      bits[w] = word;
      if (got == freed) break;  // no set bit left
      if (word == 0) w++;
    }
    s->first_word = static_cast<uint8_t>(w);
  }
  return got;
}

size_t Bin::fill(void** out, size_t n) noexcept {
  // kHardened: the never-used objects' freed marks are written once the
  // lock is released -- such an object's page is often untouched yet, and
  // its first write a page fault, which would hold every thread that fills
  // from this bin. Each slab's never-used objects are one run of out[].
  struct Run {
    size_t from, to;
  };
  Run fresh[4];
  size_t runs = 0;
  size_t got = 0;
  {
    LockGuard g(lock_);
    while (got < n) {
      Slab* s = partial_;
      if (s == nullptr && (s = empty_) == nullptr) {
        s = new_slab();
        if (s == nullptr) break;
        link(s, kEmpty);
      }
      unlink(s);
      // Freed objects first (already touched), then never-used ones.
      const size_t before = got;
      got += words_ ? fill_bitmap(s, out + got, n - got) : fill_list(s, out + got, n - got);
      const size_t bumped = got;
      while (got < n && s->bump < s->nobjs) {
        out[got++] = ptr(s->base + static_cast<size_t>(s->bump) * size_);
        s->bump++;
      }
      if (hardened_ && got > bumped) {
        if (runs < sizeof fresh / sizeof fresh[0]) {
          fresh[runs++] = {bumped, got};
        } else {
          for (size_t i = bumped; i < got; i++) mark_unused(out[i], size_);  // a long fill of many slabs
        }
      }
      s->nfree -= static_cast<uint32_t>(got - before);
      free_objects_ -= got - before;
      link(s, s->nfree == 0 ? kFull : kPartial);
    }
  }
  // Ours alone now: taken from the bin, handed to no one yet.
  for (size_t r = 0; r < runs; r++)
    for (size_t i = fresh[r].from; i < fresh[r].to; i++) mark_unused(out[i], size_);
  return got;
}

// The objects among objs[0..n) of this bin's slabs go back to them; the
// others are moved to the front (their number is returned). Called with the
// lock held; one instance per way of keeping freed objects.
//
// A cache flushes objects that mostly come from one slab, in runs: the slab
// is looked up once per run (an object inside the current slab's range needs
// no page-map lookup), and the run's bits, free-list links and count are
// gathered in registers and written to the slab header once, when the run
// ends. (Setting them object by object made every object wait for the
// previous one's store to the same header word.)
template <bool kBitmap>
size_t Bin::flush_locked(void** objs, size_t n, Lent* expired, size_t& nexpired) noexcept {
  size_t others = 0;
  Slab* s = nullptr;  // the slab of the current run
  uintptr_t lo = 0;   // its objects lie in [lo, lo + span); span 0: no run
  uintptr_t span = 0;
  uint32_t freed = 0;     // objects of the run
  size_t word = 0;        // bitmap: the word the run's latest bits go to
  uint64_t bits = 0;      //   and those bits, not yet stored
  void* head = nullptr;   // free list: the run's objects, linked newest first
  void* tail = nullptr;   //   and the oldest of them
  auto store_bits = [&]() {
    if (bits == 0) return;
    s->bits()[word] |= bits;
    if (word < s->first_word) s->first_word = static_cast<uint8_t>(word);
  };
  auto end_run = [&]() {
    if (kBitmap) {
      store_bits();
    } else {
      *static_cast<void**>(tail) = s->free_list;
      s->free_list = head;
    }
    settle(s, freed, expired, nexpired);
  };
  for (size_t k = 0; k < n; k++) {
    void* p = objs[k];
    if (addr(p) - lo >= span) {  // not in the current run's slab
      if (span != 0) end_run();
      chunk::Extent* e = arena_->chunks().lookup(p);
      DUCTILE_ASSERT(e != nullptr && e->kind == chunk::ExtentKind::kSlab && e->size_class == cls_);
      Slab* o = static_cast<Slab*>(e->owner);
      if (o->bin != this) {
        objs[others++] = p;
        span = 0;
        continue;
      }
      s = o;
      lo = s->base;
      span = static_cast<uintptr_t>(s->nobjs) * size_;
      freed = 0;
      bits = 0;
      word = 0;
      head = tail = nullptr;
    }
    if (kBitmap) {
      size_t i = index_at(addr(p) - lo);
      if (hardened_ && DUCTILE_UNLIKELY(i >= s->bump || lo + i * size_ != addr(p))) {
        // An object's start past the never-used mark: the slab was emptied
        // and started over since the object was handed out, so it is free
        // already.
        const bool object = lo + i * size_ == addr(p) && i < s->nobjs;
        fatal_pointer(object ? "free(): double free detected" : "free(): invalid pointer", p);
      }
      DUCTILE_ASSERT(i < s->bump && lo + i * size_ == addr(p));
      if (i / 64 != word) {
        store_bits();
        word = i / 64;
        bits = 0;
      }
      const uint64_t bit = uint64_t{1} << (i % 64);
      if (hardened_ && DUCTILE_UNLIKELY(((s->bits()[word] | bits) & bit) != 0))
        fatal_pointer("free(): double free detected", p);
      DUCTILE_ASSERT(((s->bits()[word] | bits) & bit) == 0);  // not freed twice
      bits |= bit;
    } else {
      *static_cast<void**>(p) = head;
      head = p;
      if (tail == nullptr) tail = p;
    }
    freed++;
  }
  if (span != 0) end_run();
  return others;
}

void Bin::start_over(Slab* s) noexcept {
  if (words_) {
    std::memset(s->bits(), 0, (s->bump + 63) / 64 * sizeof(uint64_t));
    s->first_word = 0;
  } else {
    s->free_list = nullptr;
  }
  s->bump = 0;
}

// `freed` more objects of slab s are free again.
void Bin::settle(Slab* s, uint32_t freed, Lent* expired, size_t& nexpired) noexcept {
  s->nfree += freed;
  free_objects_ += freed;
  DUCTILE_ASSERT(s->nfree <= s->nobjs);
  if (s->nfree == s->nobjs) {
    // Entirely free again: reset it to a fresh slab (objects handed out in
    // address order again) and keep it; the oldest surplus empty slab goes
    // once it has stayed empty for the decay time. A hardened bin keeps its
    // freed objects in the bitmap instead: each holds its freed mark, which
    // the hand-out checks, and a fresh slab's would overwrite it.
    unlink(s);
    if (!hardened_) start_over(s);
    s->empty_since = arena_->chunks().now_ns();
    link(s, kEmpty);
    Slab* oldest = empty_tail_;
    // Expired slabs are in flight until the arena has them (fork_gate.h);
    // under the lock, a fork in progress leaves them here for now.
    if (nempty_ > kRetainEmpty && nexpired < os::kPurgeBatch &&
        s->empty_since - oldest->empty_since >= arena_->chunks().options().decay_ns &&
        (nexpired != 0 || ForkGate::try_enter()))
      expired[nexpired++] = take_empty(oldest);
    else if (nempty_ > kRetainEmpty)
      arena_->chunks().note_retained(s->extent->size);  // decay's to release, if nobody frees here again
  } else if (s->list == kFull) {
    unlink(s);
    link(s, kPartial);
  }
}

size_t Bin::flush(void** objs, size_t n) noexcept {
  Lent expired[os::kPurgeBatch];
  size_t nexpired = 0;
  size_t others;  // objects of other bins' slabs, moved to the front
  {
    LockGuard g(lock_);
    others = words_ ? flush_locked<true>(objs, n, expired, nexpired)
                    : flush_locked<false>(objs, n, expired, nexpired);
  }
  if (nexpired) {
    arena_->free(expired, nexpired);
    ForkGate::leave();
  }
  return others;
}

Bin* Bin::owner_of(const chunk::ChunkLayer& chunks, const void* p) noexcept {
  chunk::Extent* e = chunks.lookup(p);
  DUCTILE_ASSERT(e != nullptr && e->kind == chunk::ExtentKind::kSlab);
  return static_cast<Slab*>(e->owner)->bin;
}

void Bin::flush_to_owners(const chunk::ChunkLayer& chunks, void** objs, size_t n) noexcept {
  while (n != 0) n = owner_of(chunks, objs[0])->flush(objs, n);
}

Bin::DecayResult Bin::decay(size_t max_pages) noexcept {
  // Most bins have no surplus: a look without the lock (a stale answer only
  // defers the work to the next step).
  if (__atomic_load_n(&nempty_, __ATOMIC_RELAXED) <= kRetainEmpty) return {};
  chunk::ChunkLayer& chunks = arena_->chunks();
  DecayResult r;
  r.pages = release_empty(kRetainEmpty, chunks.options().decay_ns, chunks.now_ns(), max_pages, &r.due);
  LockGuard g(lock_);
  r.more = nempty_ > kRetainEmpty;
  return r;
}

size_t Bin::release_empty(size_t keep, uint64_t min_age_ns, uint64_t now, size_t max_pages, bool* due) noexcept {
  const InFlight gate;  // taken slabs are in flight until the arena has them
  Lent batch[os::kPurgeBatch];
  const size_t slab_pages = kClasses.slab_pages[cls_];
  size_t pages = 0;
  for (;;) {
    size_t n = 0;
    uint64_t idle_since = chunk::ChunkLayer::kNow;  // the newest of the batch: decay counts on from there
    {
      LockGuard g(lock_);
      // At least one slab per call, however small the budget.
      while (nempty_ > keep && n < os::kPurgeBatch && (pages == 0 || pages + slab_pages <= max_pages) &&
             now - empty_tail_->empty_since >= min_age_ns) {
        if (min_age_ns != 0) idle_since = empty_tail_->empty_since;
        batch[n++] = take_empty(empty_tail_);
        pages += slab_pages;
      }
      if (due != nullptr)
        *due = nempty_ > keep && pages + slab_pages > max_pages && now - empty_tail_->empty_since >= min_age_ns;
    }
    if (n == 0) return pages;
    arena_->free(batch, n, idle_since);
  }
}

BinStats Bin::walk_stats() const noexcept {
  LockGuard g(const_cast<Mutex&>(lock_));
  BinStats s = stats();  // (full slabs are on no list: `slabs` is the counter's)
  size_t empty = 0, free_objs = 0;
  for (const Slab* p = partial_; p; p = p->next) free_objs += p->nfree;
  for (const Slab* p = empty_; p; p = p->next, empty++) free_objs += p->nfree;
  s.empty_slabs = empty;
  s.free_objects = free_objs;
  return s;
}

BinStats Bin::stats() const noexcept {
  // No lock: counters kept under it (base/counter.h), so a reader never
  // holds up a fill or a flush, nor walks the slabs.
  BinStats s;
  s.slabs = slabs_;
  s.empty_slabs = __atomic_load_n(&nempty_, __ATOMIC_RELAXED);
  s.free_objects = free_objects_;
  s.slab_allocs = slab_allocs_;
  s.slab_returns = slab_returns_;
  return s;
}

}  // namespace ductile::small
