/* SPDX-License-Identifier: BSD-2-Clause */
/* ductile: a general-purpose memory allocator whose huge allocations grow in place.
 *
 * The public C API. When libductile is preloaded or linked, the standard
 * allocation functions (malloc, free, ...) are ductile's; every function is
 * also available with a ductile_ prefix. */
#ifndef DUCTILE_DUCTILE_H
#define DUCTILE_DUCTILE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
/* The header compiles as C89 and later, and as C++98 and later. */
#if __cplusplus >= 201103L
#define DUCTILE_NOTHROW noexcept
#else
#define DUCTILE_NOTHROW throw()
#endif
extern "C" {
#else
#define DUCTILE_NOTHROW
#endif

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *ductile_version(void);

/* The malloc family, with the C library's semantics (errno = ENOMEM on
 * exhaustion or overflow, EINVAL for a bad alignment; posix_memalign
 * returns the error, and sets errno too for ENOMEM, as glibc's does;
 * realloc(p, 0) frees p and returns NULL, as glibc does). */
void *ductile_malloc(size_t size) DUCTILE_NOTHROW;
void ductile_free(void *ptr) DUCTILE_NOTHROW;
void *ductile_calloc(size_t nmemb, size_t size) DUCTILE_NOTHROW;
void *ductile_realloc(void *ptr, size_t size) DUCTILE_NOTHROW;
void *ductile_reallocarray(void *ptr, size_t nmemb, size_t size) DUCTILE_NOTHROW;
int ductile_posix_memalign(void **memptr, size_t alignment, size_t size) DUCTILE_NOTHROW;
void *ductile_aligned_alloc(size_t alignment, size_t size) DUCTILE_NOTHROW;
void *ductile_memalign(size_t alignment, size_t size) DUCTILE_NOTHROW;
void *ductile_valloc(size_t size) DUCTILE_NOTHROW;
void *ductile_pvalloc(size_t size) DUCTILE_NOTHROW;
size_t ductile_malloc_usable_size(void *ptr) DUCTILE_NOTHROW;
/* Returns 1 if memory was released, as glibc's malloc_trim. */
int ductile_malloc_trim(size_t pad) DUCTILE_NOTHROW;

/* Gives back to the kernel everything ductile retains now: the calling
 * thread's cached blocks, every empty slab, every free extent. Returns the
 * bytes purged. malloc_trim() does the same. */
size_t ductile_trim(void) DUCTILE_NOTHROW;

/* ---- glibc's allocator interface --------------------------------------
 *
 * Exported under glibc's names too, so that a program asks ductile about the
 * heap it uses. mallinfo2 and mallinfo (whose int fields saturate at
 * INT_MAX) fill glibc's fields from ductile's statistics, with huge blocks in
 * hblks/hblkhd apart from arena = uordblks + fordblks, as glibc keeps its
 * mmapped chunks apart; docs/api.md ("glibc's interface") says what each
 * field holds. The structs are <malloc.h>'s: include it to call these. */
struct mallinfo;
struct mallinfo2;
struct mallinfo2 ductile_mallinfo2(void) DUCTILE_NOTHROW;
struct mallinfo ductile_mallinfo(void) DUCTILE_NOTHROW;
/* The summary DUCTILE_STATS=1 prints at exit, on stderr now. Not a
 * cancellation point, as glibc's is not. */
void ductile_malloc_stats(void) DUCTILE_NOTHROW;
/* ductile's figures as XML (glibc's <malloc version="1"> root) on fp;
 * 0, or EINVAL (returned, as glibc's code does) when options is not 0. */
int ductile_malloc_info(int options, FILE *fp) DUCTILE_NOTHROW;
/* glibc's M_* parameters, with glibc's return value, 1, but for M_MXFAST:
 * 0, not supported (ductile has no fast bins, and mallinfo's smblks would
 * not be 0 after M_MXFAST 0); M_MMAP_THRESHOLD sets the huge threshold,
 * brought into the huge_threshold option's range. The others change
 * nothing. */
int ductile_mallopt(int param, int value) DUCTILE_NOTHROW;
/* C23: free a block allocated with that size (and alignment). The size and
 * alignment are not needed and not trusted: any block of ours is freed;
 * NULL is ignored. free_sized and free_aligned_sized are the same. */
void ductile_free_sized(void *ptr, size_t size) DUCTILE_NOTHROW;
void ductile_free_aligned_sized(void *ptr, size_t alignment, size_t size) DUCTILE_NOTHROW;

/* ---- jemalloc's extended API ------------------------------------------
 *
 * The same functions and flags as jemalloc 5 (see jemalloc(3)); each is
 * exported under jemalloc's name and with a ductile_ prefix. Differences:
 *  - There is one arena: MALLOCX_ARENA(a) is accepted for any a and has no
 *    effect; "arena.<i>.*" answers for i = 0 and MALLCTL_ARENAS_ALL only.
 *  - MALLOCX_TCACHE_NONE and MALLOCX_TCACHE(tc) are accepted and ignored:
 *    the calling thread's cache is used as for malloc.
 *  - xallocx() also grows huge blocks (2 MiB and more) in place: where
 *    jemalloc returns the old size, ductile usually returns the new one.
 *  - sdallocx() does not trust its size: a wrong size cannot corrupt.
 * Sizes past PTRDIFF_MAX fail (NULL, and nallocx returns 0).
 *
 * Both headers may be included in one file, <jemalloc/jemalloc.h> first or
 * last: the flag macros are defined here only where jemalloc's are not, and
 * the unprefixed functions are declared as jemalloc declares them. */
#ifndef MALLOCX_ZERO
/* Align to (1 << la). */
#define MALLOCX_LG_ALIGN(la) ((int)(la))
/* Align to a, a power of two (the lowest set bit of a is used). */
#define MALLOCX_ALIGN(a) ((int)__builtin_ffsl((long)(a)) - 1)
/* New bytes read as zero (for rallocx/xallocx: those past the old size). */
#define MALLOCX_ZERO ((int)0x40)
#define MALLOCX_TCACHE(tc) ((int)(((tc) + 2) << 8))
#define MALLOCX_TCACHE_NONE MALLOCX_TCACHE(-1)
#define MALLOCX_ARENA(a) ((((int)(a)) + 1) << 20)
#endif
#ifndef MALLCTL_ARENAS_ALL
/* The arena index meaning "every arena", as in "arena.4096.purge". */
#define MALLCTL_ARENAS_ALL 4096
#endif

void *ductile_mallocx(size_t size, int flags) DUCTILE_NOTHROW;
void *ductile_rallocx(void *ptr, size_t size, int flags) DUCTILE_NOTHROW;
/* Resizes in place to at least size (and up to size + extra where it can);
 * never moves. Returns the usable size after: the old one if it could not. */
size_t ductile_xallocx(void *ptr, size_t size, size_t extra, int flags) DUCTILE_NOTHROW;
size_t ductile_sallocx(const void *ptr, int flags) DUCTILE_NOTHROW;
void ductile_dallocx(void *ptr, int flags) DUCTILE_NOTHROW;
void ductile_sdallocx(void *ptr, size_t size, int flags) DUCTILE_NOTHROW;
/* The usable size mallocx(size, flags) would return; 0 if it cannot. */
size_t ductile_nallocx(size_t size, int flags) DUCTILE_NOTHROW;

/* Introspection and control by name ("stats.allocated", "opt.decay_ms",
 * "arena.0.purge", "ductile.huge.growth.mremap", ...); the names are listed
 * in docs/api.md. 0 on success, else ENOENT (unknown name), EINVAL
 * (wrong *oldlenp or newlen), EPERM (read-only or void value written). */
int ductile_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
                    size_t newlen) DUCTILE_NOTHROW;
int ductile_mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp) DUCTILE_NOTHROW;
int ductile_mallctlbymib(const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
                         void *newp, size_t newlen) DUCTILE_NOTHROW;
/* Writes a summary (bytes by layer, system calls, huge growth by path,
 * retained and purged bytes) through write_cb, or to stderr when it is NULL.
 * opts: "J" for JSON, "b" to leave out the per-class lines. Never calls
 * malloc itself. */
void ductile_malloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque,
                                const char *opts) DUCTILE_NOTHROW;

#ifndef JEMALLOC_H_
/* jemalloc's names, declared as <jemalloc/jemalloc.h> declares them. */
void *mallocx(size_t size, int flags) __attribute__((nothrow));
void *rallocx(void *ptr, size_t size, int flags) __attribute__((nothrow));
size_t xallocx(void *ptr, size_t size, size_t extra, int flags) __attribute__((nothrow));
size_t sallocx(const void *ptr, int flags) __attribute__((nothrow));
void dallocx(void *ptr, int flags) __attribute__((nothrow));
void sdallocx(void *ptr, size_t size, int flags) __attribute__((nothrow));
size_t nallocx(size_t size, int flags) __attribute__((nothrow));
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
    __attribute__((nothrow));
int mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp) __attribute__((nothrow));
int mallctlbymib(const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp, void *newp,
                 size_t newlen) __attribute__((nothrow));
void malloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque, const char *opts)
    __attribute__((nothrow));
#endif

#ifdef __cplusplus
}
#endif

#endif /* DUCTILE_DUCTILE_H */
