/* SPDX-License-Identifier: BSD-2-Clause */
// The two heaps that serve what the runtime cannot: the start-up buffer
// (calls made while this thread creates the runtime) and the heap of a child
// forked in the middle of an allocator call.
#pragma once

#include <cstddef>

#include "base/lock.h"

namespace ductile::core {

// ---- bootstrap ---------------------------------------------------------
// Memory for calls that reach us while this very thread is creating the
// runtime (a libc function that allocates on first use, an interposed
// getenv). Never reused, so it reads as zero; a 16-byte header before each
// block holds its size for realloc and malloc_usable_size. Only the thread
// that holds the init lock gets here, but the offset is claimed atomically
// all the same.
bool is_bootstrap(const void* p);
void* bootstrap_alloc(size_t size, size_t align);
size_t bootstrap_size(const void* p);

// ---- the heap of a child forked mid-call -------------------------------
// The child of such a fork allocates from a heap of its own: the heap it
// inherited has an operation half done (the interrupted one), which the
// child would find. Blocks are carved in turn from fresh mappings and never
// reused, each after a 16-byte header holding its size; every free is
// dropped (blocks from before the fork too), realloc copies. Such a child
// execs or exits soon; it gets no thread cache.
extern bool g_fork_heap;  // set in such a child only
extern Mutex g_fork_heap_lock;  // for the threads such a child may start
void* fork_heap_alloc(size_t size, size_t align);
// The size of a block of the child's own heap; 0 for any other pointer.
size_t fork_heap_size(const void* p);

}  // namespace ductile::core
