// SPDX-License-Identifier: BSD-2-Clause
// The OS layer (os/os.h): the feature probes, and each memory call with its
// fallbacks, batching and counters.
#include "os/os.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ductile::os {

namespace {
// PIDFD_SELF names the calling process (Linux 6.15); glibc 2.36 does not define it.
#ifdef PIDFD_SELF
constexpr int kPidfdSelf = PIDFD_SELF;
#else
constexpr int kPidfdSelf = -10000;
#endif
#ifndef MAP_FIXED_NOREPLACE
constexpr int kMapFixedNoreplace = 0x100000;
#else
constexpr int kMapFixedNoreplace = MAP_FIXED_NOREPLACE;
#endif
#ifndef MADV_POPULATE_WRITE
constexpr int kMadvPopulateWrite = 23;
#else
constexpr int kMadvPopulateWrite = MADV_POPULATE_WRITE;
#endif
#ifndef MADV_FREE
constexpr int kMadvFree = 8;
#else
constexpr int kMadvFree = MADV_FREE;
#endif

// Guard markers (Linux 6.13): page-table entries that fault on any access,
// installed and removed without touching the mapping.
#ifndef MADV_GUARD_INSTALL
constexpr int kMadvGuardInstall = 102;
#else
constexpr int kMadvGuardInstall = MADV_GUARD_INSTALL;
#endif
#ifndef MADV_GUARD_REMOVE
constexpr int kMadvGuardRemove = 103;
#else
constexpr int kMadvGuardRemove = MADV_GUARD_REMOVE;
#endif

constexpr int kRw = PROT_READ | PROT_WRITE;
constexpr int kPrivate = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

// Errors that mean "this kernel (or its seccomp policy) does not do that":
// the fallback taken after one of them sticks.
bool is_unsupported(int err) {
  return err == ENOSYS || err == EINVAL || err == EPERM || err == EBADF || err == EOPNOTSUPP;
}
}  // namespace

const char* call_name(Call c) noexcept {
  switch (c) {
    case Call::kMmap: return "mmap";
    case Call::kMunmap: return "munmap";
    case Call::kMprotect: return "mprotect";
    case Call::kMremap: return "mremap";
    case Call::kMadvise: return "madvise";
    case Call::kProcessMadvise: return "process_madvise";
    case Call::kPidfdOpen: return "pidfd_open";
    case Call::kCount: break;
  }
  return "?";
}

uint64_t Counters::total() const noexcept {
  uint64_t t = 0;
  for (const auto& c : calls) t += c.load(std::memory_order_relaxed);
  return t;
}

void Counters::reset() noexcept {
  for (auto& c : calls) c.store(0, std::memory_order_relaxed);
  purged_bytes.store(0, std::memory_order_relaxed);
  purged_ranges.store(0, std::memory_order_relaxed);
  splits_avoided.store(0, std::memory_order_relaxed);
}

Os::Os(Kernel& kernel) noexcept : kernel_(kernel) { probe(); }

Os::~Os() {
  if (features_.self_pidfd >= 0) kernel_.close(features_.self_pidfd);
}

void Os::probe() noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  features_.address_space_limit = kernel_.address_space_limit();
  char buf[64];
  if (kernel_.read_small_file("/proc/sys/vm/overcommit_memory", buf, sizeof buf) > 0)
    features_.strict_overcommit = buf[0] == '2';
  // The THP mode: at its first use (thp_mode). vm.max_map_count: by the
  // mapping budget, at its first count.
}

ThpMode Os::read_thp_mode() noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  ThpMode m = ThpMode::kUnknown;
  char buf[64];
  if (kernel_.read_small_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf) > 0) {
    // The selected mode is the bracketed word: "always [madvise] never".
    if (std::strstr(buf, "[always]")) m = ThpMode::kAlways;
    else if (std::strstr(buf, "[madvise]")) m = ThpMode::kMadvise;
    else if (std::strstr(buf, "[never]")) m = ThpMode::kNever;
  }
  thp_.store(static_cast<uint8_t>(m), std::memory_order_relaxed);
  return m;
}

bool Os::probe_scratch_once() noexcept {
  uint8_t state = kUnprobed;
  if (!scratch_probe_.compare_exchange_strong(state, kProbing, std::memory_order_acquire))
    return state == kProbed;
  const bool probed = probe_scratch();
  scratch_probe_.store(probed ? kProbed : kUnprobed, std::memory_order_release);
  return probed;
}

bool Os::probe_scratch() noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  // Two scratch pages: the kernel's answers about them are the feature set.
  // Refused (at the mapping limit, or out of commit charge under strict
  // overcommit: a late probe can meet either), the caller goes on without
  // the features, and a later call asks again.
  count(Call::kMmap);
  void* scratch = kernel_.mmap(nullptr, 2 * kPage, kRw, MAP_PRIVATE | MAP_ANONYMOUS);
  if (scratch == MAP_FAILED) return false;
  static_cast<char*>(scratch)[0] = 1;

  count(Call::kMadvise);
  features_.madv_free = kernel_.madvise(scratch, kPage, kMadvFree) == 0;
  count(Call::kMadvise);
  features_.populate_write = kernel_.madvise(scratch, kPage, kMadvPopulateWrite) == 0;
  probe_batch_purge(scratch);

  count(Call::kMunmap);
  (void)kernel_.munmap(scratch, 2 * kPage);
  return true;
}

void Os::probe_batch_purge(void* scratch) noexcept {
  // Two discontiguous-in-the-iovec ranges: the kernel must advise both.
  struct iovec iov[2] = {{scratch, kPage}, {static_cast<char*>(scratch) + kPage, kPage}};
  count(Call::kProcessMadvise);
  if (kernel_.process_madvise(kPidfdSelf, iov, 2, MADV_DONTNEED) == static_cast<ssize_t>(2 * kPage)) {
    features_.self_pidfd = kPidfdSelf;
    features_.batch_purge = true;
    return;
  }
  // Before 6.15 there is no PIDFD_SELF: a pidfd of our own process works from 6.13.
  count(Call::kPidfdOpen);
  int fd = kernel_.pidfd_open(getpid());
  if (fd < 0) return;
  count(Call::kProcessMadvise);
  if (kernel_.process_madvise(fd, iov, 2, MADV_DONTNEED) == static_cast<ssize_t>(2 * kPage)) {
    features_.self_pidfd = fd;
    features_.batch_purge = true;
    return;
  }
  kernel_.close(fd);
}

void Os::after_fork_in_child() noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  maps_.after_fork_in_child();
  membarrier_state_.store(0, std::memory_order_relaxed);  // registered again for the child's own memory
  // An inherited pidfd names the parent: dropped (also one that a probe
  // another thread of the parent was running had opened). Then, as after a
  // probe that never ends here (the parent's scratch pages stay mapped),
  // the child's first purge probes again, as a new process's does.
  const bool pidfd = features_.self_pidfd >= 0;
  if (pidfd) {
    kernel_.close(features_.self_pidfd);
    features_.self_pidfd = -1;
    features_.batch_purge = false;
  }
  if (pidfd || scratch_probe_.load(std::memory_order_relaxed) == kProbing)
    scratch_probe_.store(kUnprobed, std::memory_order_relaxed);
}

int Os::prot_reserved() const noexcept { return features_.strict_overcommit ? PROT_NONE : kRw; }
int Os::flags_reserved() const noexcept { return kPrivate; }

void* Os::reserve(size_t size) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  if (size == 0 || !is_aligned(size, kPage)) return nullptr;
  maps_.note(kernel_, 1);
  count(Call::kMmap);
  void* p = kernel_.mmap(nullptr, size, prot_reserved(), flags_reserved());
  if (p != MAP_FAILED) return p;
  failed();
  return nullptr;
}

MapStatus Os::reserve_at(void* addr, size_t size) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  if (size == 0 || !is_aligned(size, kPage) || !is_aligned(ductile::addr(addr), kPage) ||
      ductile::addr(addr) + size < ductile::addr(addr))
    return MapStatus::kFailed;
  int flags = flags_reserved() | (features_.map_fixed_noreplace ? kMapFixedNoreplace : 0);
  maps_.note(kernel_, 1);
  count(Call::kMmap);
  void* p = kernel_.mmap(addr, size, prot_reserved(), flags);
  if (p == MAP_FAILED) {
    if (errno == EEXIST) return MapStatus::kOccupied;
    failed();
    return MapStatus::kFailed;
  }
  if (p == addr) return MapStatus::kMapped;
  // Without MAP_FIXED_NOREPLACE the address was only a hint and the kernel
  // placed the mapping elsewhere because something is there: give it back.
  // A kernel that knew the flag would have said EEXIST: this one does not
  // (before 4.17), and is not asked again.
  features_.map_fixed_noreplace = false;
  count(Call::kMunmap);
  (void)kernel_.munmap(p, size);
  return MapStatus::kOccupied;
}

bool Os::unmap(void* addr, size_t size) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  if (size == 0 || !is_aligned(ductile::addr(addr), kPage) || !is_aligned(size, kPage)) return false;
  maps_.note(kernel_, 1);  // a hole inside a mapping splits it
  count(Call::kMunmap);
  if (kernel_.munmap(addr, size) == 0) return true;
  failed();
  return false;
}

bool Os::commit(void* addr, size_t size) noexcept {
  if (!features_.strict_overcommit) return true;
  return protect(addr, size, kRw);
}

// Normal mode: a guard marker where the kernel has them, so that a guard
// splits no mapping -- mprotect's made every live guarded block cost two
// mappings, and at vm.max_map_count (65 530) the 32 749th huge block was
// refused. The first refusal with EINVAL before any marker was taken says
// the kernel predates them, and mprotect serves every guard from then on;
// one after that (a locked mapping: mlockall) has that guard alone made by
// mprotect. A guard must be PROT_NONE whatever the mapping budget says: it
// is the point of hardened mode (docs: guard pages).
bool Os::guard(void* addr, size_t size) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  if (features_.strict_overcommit) return map_fresh(addr, size);  // PROT_NONE, uncharged
  if (guard_markers_.load(std::memory_order_relaxed) != kNo) {
    count(Call::kMadvise);
    if (kernel_.madvise(addr, size, kMadvGuardInstall) == 0) {
      guard_markers_.store(kYes, std::memory_order_relaxed);
      return true;
    }
    if (errno != EINVAL) {
      failed();
      return false;
    }
    uint8_t unknown = kUnknown;
    guard_markers_.compare_exchange_strong(unknown, kNo, std::memory_order_relaxed);
  }
  protected_guards_.store(true, std::memory_order_relaxed);
  return protect(addr, size, PROT_NONE);
}

// Removing markers leaves every other page of the range as it is (and a
// transparent huge page whole); mprotect only where a guard was made by it.
bool Os::unguard(void* addr, size_t size) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  if (features_.strict_overcommit) return protect(addr, size, kRw);  // a commit
  bool ok = true;
  if (guard_markers_.load(std::memory_order_relaxed) == kYes) {
    count(Call::kMadvise);
    if (kernel_.madvise(addr, size, kMadvGuardRemove) != 0) {
      failed();
      ok = false;
    }
  }
  if (ok && protected_guards_.load(std::memory_order_relaxed)) ok = protect(addr, size, kRw);
  return ok;
}

bool Os::protect(void* addr, size_t size, int prot) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  maps_.note(kernel_, 2);  // part of a mapping splits it
  count(Call::kMprotect);
  if (kernel_.mprotect(addr, size, prot) == 0) return true;
  failed();
  return false;
}

Decommit Os::decommit(void* addr, size_t size, bool huge) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's (a count opens a file)
  if (features_.strict_overcommit) {
    // Mapping PROT_NONE over the range drops its pages and its commit charge
    // in one call -- and splits the read/write mapping it lies in.
    if (maps_.allow_split(kernel_)) {
      if (map_fresh(addr, size)) {
        if (huge) (void)advise_huge(addr, size);
        return Decommit::kDecommitted;
      }
    } else {
      counters_.splits_avoided.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // (Refused, or near the mapping limit: the pages go, the charge stays.
  // A failed MAP_FIXED mmap refused for the limit has changed nothing: the
  // kernel checks the count before it unmaps.)
  Range r{addr, size};
  return purge(&r, 1) == 1 ? Decommit::kPurged : Decommit::kFailed;
}

bool Os::map_fresh(void* addr, size_t size) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  maps_.note(kernel_, 2);
  count(Call::kMmap);
  if (kernel_.mmap(addr, size, prot_reserved(), flags_reserved() | MAP_FIXED) == addr) return true;
  failed();
  return false;
}

void* Os::remap(void* old_addr, size_t old_size, size_t new_size, RemapMode mode, void* target) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  int flags = 0;
  if (mode == RemapMode::kMayMove) flags = MREMAP_MAYMOVE;
  if (mode == RemapMode::kFixed) {
    if (target == nullptr) return nullptr;
    flags = MREMAP_MAYMOVE | MREMAP_FIXED;
  }
  maps_.note(kernel_, 1);
  count(Call::kMremap);
  void* p = kernel_.mremap(old_addr, old_size, new_size, flags, target);
  if (p != MAP_FAILED) return p;
  failed();
  return nullptr;
}

bool Os::purge_one(const Range& r, int advice) noexcept {
  count(Call::kMadvise);
  if (kernel_.madvise(r.addr, r.size, advice) != 0) return false;
  counters_.purged_bytes.fetch_add(r.size, std::memory_order_relaxed);
  counters_.purged_ranges.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Os::disable_batch_purge() noexcept {
  features_.batch_purge = false;
  if (features_.self_pidfd >= 0) kernel_.close(features_.self_pidfd);
  features_.self_pidfd = -1;
}

size_t Os::purge_batch(const Range* ranges, size_t n, int advice) noexcept {
  struct iovec iov[kPurgeBatch];
  size_t done = 0;  // ranges fully purged
  size_t partial = 0;  // bytes of ranges[done] already purged by a short return
  while (done < n) {
    size_t k = 0;
    for (; k < kPurgeBatch && done + k < n; k++) {
      iov[k].iov_base = static_cast<char*>(ranges[done + k].addr) + (k == 0 ? partial : 0);
      iov[k].iov_len = ranges[done + k].size - (k == 0 ? partial : 0);
    }
    count(Call::kProcessMadvise);
    ssize_t r = kernel_.process_madvise(features_.self_pidfd, iov, k, advice);
    if (r < 0) {
      if (is_unsupported(errno)) disable_batch_purge();
      return done;
    }
    // The kernel advises ranges in order and reports bytes: a short return
    // means it stopped inside (or before) some range; resume there.
    size_t bytes = static_cast<size_t>(r);
    if (bytes == 0) return done;  // no progress: let the caller fall back
    counters_.purged_bytes.fetch_add(bytes, std::memory_order_relaxed);
    for (size_t i = 0; i < k && bytes > 0; i++) {
      size_t left = iov[i].iov_len;
      if (bytes >= left) {
        bytes -= left;
        done++;
        partial = 0;
        counters_.purged_ranges.fetch_add(1, std::memory_order_relaxed);
      } else {
        partial += bytes;
        bytes = 0;
      }
    }
  }
  return done;
}

size_t Os::purge(const Range* ranges, size_t n, Advice advice) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  const bool probed = ensure_probed();
  int adv = MADV_DONTNEED;
  if (probed && advice == Advice::kFree && features_.madv_free) adv = kMadvFree;
  size_t done = 0;
  if (probed && n > 1 && features_.batch_purge) done = purge_batch(ranges, n, adv);
  // Single ranges, and whatever the batch call left (refused, failed part way).
  for (; done < n; done++) {
    const Range& r = ranges[done];
    if (!purge_one(r, adv)) {
      if (adv == kMadvFree && errno == EINVAL) {
        features_.madv_free = false;  // sticky: MADV_DONTNEED from now on
        adv = MADV_DONTNEED;
        if (purge_one(r, adv)) continue;
      }
      break;
    }
  }
  return done;
}

bool Os::advise_huge(void* addr, size_t size) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
#ifdef MADV_HUGEPAGE
  if (thp_mode() != ThpMode::kMadvise) return true;
  maps_.note(kernel_, 1);
  return madvise_huge(addr, size);
#else
  (void)addr, (void)size;
  return true;
#endif
}

bool Os::advise_huge_part(void* addr, size_t size) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  if (thp_mode() != ThpMode::kMadvise) return true;
  if (!maps_.allow_split(kernel_)) {
    counters_.splits_avoided.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return madvise_huge(addr, size);
}

bool Os::madvise_huge(void* addr, size_t size) noexcept {
#ifdef MADV_HUGEPAGE
  count(Call::kMadvise);
  if (kernel_.madvise(addr, size, MADV_HUGEPAGE) == 0) return true;
  failed();
#else
  (void)addr, (void)size;
#endif
  return false;
}

bool Os::fence_all_threads() noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  constexpr int kPrivateExpedited = 1 << 3, kRegisterPrivateExpedited = 1 << 4;  // linux/membarrier.h
  int state = membarrier_state_.load(std::memory_order_acquire);
  if (state == 0) {
    state = kernel_.membarrier(kRegisterPrivateExpedited, 0) == 0 ? 1 : 2;
    membarrier_state_.store(state, std::memory_order_release);
  }
  return state == 1 && kernel_.membarrier(kPrivateExpedited, 0) == 0;
}

bool Os::populate(void* addr, size_t size) noexcept {
  const KeepErrno keep;  // see common.h: errno is the caller's
  if (!ensure_probed() || !features_.populate_write) return false;
  count(Call::kMadvise);
  if (kernel_.madvise(addr, size, kMadvPopulateWrite) == 0) return true;
  if (errno == EINVAL) features_.populate_write = false;
  return false;
}

}  // namespace ductile::os
