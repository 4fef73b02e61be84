/* SPDX-License-Identifier: BSD-2-Clause */
// What changes while the program runs: the calling thread's cache (flush,
// on/off), trim, and the huge threshold.
#pragma once

#include <cstddef>

#include "base/lock.h"
#include "small/thread_cache.h"

namespace ductile::core {

// The calling thread's cache, made now if it has none yet; nullptr where it
// cannot have one (tcache:false, or while it exits). Allocates nothing.
small::ThreadCache* thread_cache() noexcept;
// Gives the calling thread's cached blocks back to their bins (tcache.flush).
void flush_thread_cache() noexcept;
// thread.tcache.enabled: whether the calling thread uses a cache; setting
// it false flushes the thread's cache and gives it back.
bool thread_cache_enabled() noexcept;
void set_thread_cache_enabled(bool on) noexcept;
// Flushes the calling thread's cache, releases every empty slab and purges
// every retained extent. Returns the bytes purged.
size_t trim() noexcept;
// Serialises changes of run-time options (mallctl writes, mallopt); taken
// around fork, so a child never inherits it held.
Mutex& options_lock() noexcept;
// Changes the huge threshold at run time (mallopt's M_MMAP_THRESHOLD) to
// `bytes`, which must be a value the huge_threshold option accepts; false,
// with nothing changed, for any other or while the runtime is not ready.
// Blocks keep the range they were made in -- free and realloc go by the
// extent's kind -- so only later requests are served differently.
bool set_huge_threshold(size_t bytes) noexcept;

}  // namespace ductile::core
