/* SPDX-License-Identifier: BSD-2-Clause */
/* The attack table's program: small, deterministic misuses of the heap
 * (double frees, bad pointers, writes after free, overflows, wrong sizes),
 * one per case. `attacks CASE` runs one case, `attacks --list` lists them
 * with what each does. The program calls only the C library's allocation
 * interface -- the jemalloc and C23 extensions are looked up at run time
 * with dlsym -- and does not link libductile, so that LD_PRELOAD picks the
 * allocator attacked (test/attacks/attack-table.sh runs every case under
 * each allocator; test/integration/attacks_test.sh checks ductile's
 * reports).
 *
 * It writes, with write(2) (stdio would allocate), on standard output:
 *   step write    before a write the program must not make (after a free,
 *                 past a block's end)
 *   step attack   before the faulting call (the bad free, realloc, ...)
 *   step next     before the later operations on the same size or block
 *   step end      when the case ran to its end; it then exits 0
 *   note TEXT     what it saw (e.g. one block handed out twice)
 *   n/a TEXT      the allocator lacks the interface the case needs (exit 77)
 * and nothing on standard error, which is left to the allocator. The last
 * step printed says where the program stopped. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void say(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(1, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}
static void step(const char* s) {
  say("step ");
  say(s);
  say("\n");
}
static void note(const char* s) {
  say("note ");
  say(s);
  say("\n");
}
static void not_available(const char* what) {
  say("n/a ");
  say(what);
  say("\n");
  _exit(77);
}
static void need(const void* p) {
  if (p == NULL) {
    say("error: an allocation the case needs failed\n");
    _exit(2);
  }
}

/* Pointers go through a volatile object so that the compiler neither drops
 * an allocation nor reasons about a freed pointer (built with -fno-builtin
 * too). */
static void* volatile sink;
static char* launder(void* p) {
  sink = p;
  return (char*)sink;
}
static void poke(char* p, size_t n) {
  volatile char* v = p;
  for (size_t i = 0; i < n; i++) v[i] = 0x41;
}
static uintptr_t load_word(const char* p) {
  uintptr_t w;
  memcpy(&w, p, sizeof w);
  return w;
}
static void store_word(char* p, uintptr_t w) {
  memcpy(p, &w, sizeof w);
  sink = p;
}

/* The extensions, looked up at run time (absent from glibc and others). */
typedef void (*free_sized_fn)(void*, size_t);
typedef void (*free_aligned_sized_fn)(void*, size_t, size_t);
typedef void* (*mallocx_fn)(size_t, int);
typedef void (*sdallocx_fn)(void*, size_t, int);
#define LG_ALIGN(la) ((int)(la)) /* jemalloc's MALLOCX_LG_ALIGN */
static void* lookup(const char* name) { return dlsym(RTLD_DEFAULT, name); }

#define KiB ((size_t)1024)
#define MiB (KiB * 1024)

/* malloc(size) twice after the attack: notes whether both calls returned
 * the same block. */
static void malloc_twice(size_t size) {
  step("next");
  char* a = launder(malloc(size));
  char* b = launder(malloc(size));
  if (a != NULL && a == b) note("same block handed out twice");
}

static void double_free(size_t size, int then_malloc) {
  char* p = launder(malloc(size));
  need(p);
  poke(p, size < 4096 ? size : 4096);
  free(p);
  step("attack");
  free(p);
  if (then_malloc) malloc_twice(size);
}

static void case_double_free_small(void) { double_free(40, 0); }
static void case_double_free_small_reuse(void) { double_free(40, 1); }
static void case_double_free_small_between(void) {
  char* p = launder(malloc(40));
  char* q[4];
  need(p);
  for (int i = 0; i < 4; i++) need(q[i] = launder(malloc(40)));
  free(p);
  for (int i = 0; i < 4; i++) free(q[i]);
  step("attack");
  free(p);
  step("next");
  char* got[6];
  for (int i = 0; i < 6; i++) got[i] = launder(malloc(40));
  for (int i = 0; i < 6; i++)
    for (int j = i + 1; j < 6; j++)
      if (got[i] != NULL && got[i] == got[j]) {
        note("same block handed out twice");
        return;
      }
}
/* 3000 bytes: a class nothing else in the process uses, so the block is
 * alone in its slab (the slab empties at the first free). */
static void case_double_free_lone_small(void) { double_free(3000, 0); }
static void case_double_free_16(void) { double_free(16, 1); }
static void case_double_free_medium(void) { double_free(64 * KiB, 1); }
static void case_double_free_huge(void) { double_free(4 * MiB, 1); }

static void case_free_stack(void) {
  char buf[64];
  memset(buf, 0, sizeof buf);
  step("attack");
  free(launder(buf + 16));
}
static _Alignas(16) char global_block[64];
static void case_free_global(void) {
  step("attack");
  free(launder(global_block));
}

/* free(p + offset); then malloc(size): notes whether it returned p + offset. */
static void free_inside(size_t size, size_t offset) {
  char* p = launder(malloc(size));
  need(p);
  step("attack");
  free(p + offset);
  step("next");
  char* a = launder(malloc(size));
  if (a == p + offset) note("the interior pointer handed out as a block");
}
static void case_free_interior_small(void) { free_inside(40, 16); }
static void case_free_interior_medium(void) { free_inside(64 * KiB, 4096); }
static void case_free_interior_huge(void) { free_inside(4 * MiB, 4096); }
static void case_free_misaligned(void) { free_inside(40, 3); }

/* Writes 8 bytes at `offset` of a freed block of `size`, then mallocs twice. */
static void write_after_free(size_t size, size_t offset) {
  char* p = launder(malloc(size));
  need(p);
  free(p);
  step("write");
  store_word(p + offset, (uintptr_t)0x4141414141414141u);
  malloc_twice(size);
}
static void case_uaf_first_word(void) { write_after_free(40, 0); }
static void case_uaf_offset_24(void) { write_after_free(64, 24); }
static void case_uaf_first_word_medium(void) { write_after_free(64 * KiB, 0); }

/* malloc(size), and a neighbour of the same size when `neighbour`; writes
 * `len` bytes at p + at; frees them; then mallocs and frees twice more. */
static void overflow(size_t size, size_t at, size_t len, int neighbour) {
  char* p = launder(malloc(size));
  char* q = neighbour ? launder(malloc(size)) : NULL;
  need(p);
  if (neighbour) need(q);
  step("write");
  poke(p + at, len);
  step("attack");
  free(p);
  if (q) free(q);
  step("next");
  for (int i = 0; i < 2; i++) {
    char* a = launder(malloc(size));
    char* b = launder(malloc(size));
    free(a);
    free(b);
  }
}
static void case_overflow_1_small(void) { overflow(40, 40, 1, 0); }
static void case_overflow_16_small(void) { overflow(40, 40, 16, 0); }
static void case_overflow_block_small(void) { overflow(40, 40, 48, 1); }
static void case_overflow_1_medium(void) { overflow(64 * KiB, 64 * KiB, 1, 0); }
static void case_overflow_4k_medium(void) { overflow(20 * KiB, 20 * KiB, 4 * KiB, 1); }
static void case_overflow_1_huge(void) { overflow(4 * MiB, 4 * MiB, 1, 0); }
/* Writes the 16 bytes before a 40-byte block (the end of its neighbour, or
 * a header), then frees it. */
static void case_underflow_small(void) {
  char* p = launder(malloc(40));
  need(p);
  step("write");
  poke(p - 16, 16);
  step("attack");
  free(p);
  malloc_twice(40);
}

/* A 40-byte block freed as if it were 4000 bytes; then malloc(4000). */
static void sized_free_wrong(int use_sdallocx) {
  free_sized_fn fs = (free_sized_fn)lookup("free_sized");
  sdallocx_fn sd = (sdallocx_fn)lookup("sdallocx");
  if (use_sdallocx ? sd == NULL : fs == NULL) not_available(use_sdallocx ? "no sdallocx" : "no free_sized");
  char* p = launder(malloc(40));
  need(p);
  step("attack");
  if (use_sdallocx) sd(p, 4000, 0);
  else fs(p, 4000);
  step("next");
  char* a = launder(malloc(4000));
  char* b = launder(malloc(4000));
  if (a == p || b == p) note("the 40-byte block handed out for 4000 bytes");
}
static void case_free_sized_wrong(void) { sized_free_wrong(0); }
static void case_sdallocx_wrong_size(void) { sized_free_wrong(1); }

/* mallocx(70000, MALLOCX_LG_ALIGN(16)), freed by sdallocx(p, 70000, 0); where
 * the jemalloc API is absent: aligned_alloc(65536, 70000) freed by
 * free_sized(p, 70000) (the size without the alignment). */
static void case_sdallocx_wrong_align(void) {
  mallocx_fn mx = (mallocx_fn)lookup("mallocx");
  sdallocx_fn sd = (sdallocx_fn)lookup("sdallocx");
  free_sized_fn fs = (free_sized_fn)lookup("free_sized");
  char* p;
  if (mx != NULL && sd != NULL) {
    need(p = launder(mx(70000, LG_ALIGN(16))));
    step("attack");
    sd(p, 70000, 0);
  } else if (fs != NULL) {
    need(p = launder(aligned_alloc(64 * KiB, 70000)));
    step("attack");
    fs(p, 70000);
  } else {
    not_available("no mallocx/sdallocx, no free_sized");
  }
  malloc_twice(70000);
}

/* The forged marks' start: free a 40 B block, read its first word (what
 * free left there: a freed mark, a link), free it again. Returns the block;
 * *leaked is the word. */
static char* free_twice_leaking(uintptr_t* leaked) {
  char* p = launder(malloc(40));
  need(p);
  free(p);
  *leaked = load_word(p);
  step("attack");
  free(p);
  return p;
}
/* The word written back after the second free, then malloc twice. */
static void case_forged_mark(void) {
  uintptr_t leaked;
  char* p = free_twice_leaking(&leaked);
  step("write");
  store_word(p, leaked);
  malloc_twice(40);
}
/* As forged-mark, but the word is written back after the first malloc
 * handed the block out (when the block came back), before the second. */
static void case_forged_mark_between(void) {
  uintptr_t leaked;
  char* p = free_twice_leaking(&leaked);
  step("next");
  char* a = launder(malloc(40));
  if (a == p) store_word(a, leaked);
  char* b = launder(malloc(40));
  if (a != NULL && a == b) note("same block handed out twice");
}

static void realloc_freed(size_t size) {
  char* p = launder(malloc(size));
  need(p);
  free(p);
  step("attack");
  char* q = launder(realloc(p, 2 * size));
  step("next");
  char* a = launder(malloc(size));
  if (q != NULL && a == q) note("realloc's block handed out again by malloc");
}
static void case_realloc_freed_small(void) { realloc_freed(40); }
static void case_realloc_freed_medium(void) { realloc_freed(64 * KiB); }

struct attack {
  const char* name;
  void (*run)(void);
  const char* what;
};
static const struct attack kAttacks[] = {
    {"double-free-small", case_double_free_small, "free a 40 B block twice, then exit"},
    {"double-free-small-reuse", case_double_free_small_reuse, "free a 40 B block twice, then malloc(40) twice"},
    {"double-free-small-between", case_double_free_small_between,
     "free a 40 B block, four others, the first again, then malloc(40) 6 times"},
    {"double-free-lone-small", case_double_free_lone_small, "free the only 3000 B block (alone in its slab) twice"},
    {"double-free-medium", case_double_free_medium, "free a 64 KiB block twice, then malloc twice"},
    {"double-free-huge", case_double_free_huge, "free a 4 MiB block twice, then malloc twice"},
    {"free-stack", case_free_stack, "free a stack address"},
    {"free-global", case_free_global, "free a global's address"},
    {"free-interior-small", case_free_interior_small, "free a 40 B block + 16, then malloc(40)"},
    {"free-interior-medium", case_free_interior_medium, "free a 64 KiB block + 4096, then malloc(64 KiB)"},
    {"uaf-first-word", case_uaf_first_word, "write the first word of a freed 40 B block, then malloc(40) twice"},
    {"uaf-offset-24", case_uaf_offset_24, "write at offset 24 of a freed 64 B block, then malloc(64) twice"},
    {"overflow-1-small", case_overflow_1_small, "malloc(40), write p[40], free"},
    {"overflow-16-small", case_overflow_16_small, "malloc(40), write p[40..55], free"},
    {"overflow-block-small", case_overflow_block_small,
     "malloc(40) twice, write 48 bytes at p+40, free both"},
    {"overflow-1-medium", case_overflow_1_medium, "malloc(64 KiB), write one byte past it, free"},
    {"overflow-4k-medium", case_overflow_4k_medium,
     "malloc(20 KiB) twice, write 4 KiB past the first, free both"},
    {"overflow-1-huge", case_overflow_1_huge, "malloc(4 MiB), write one byte past it, free"},
    {"free-sized-wrong", case_free_sized_wrong, "free_sized(malloc(40), 4000), then malloc(4000) twice"},
    {"sdallocx-wrong-align", case_sdallocx_wrong_align,
     "sdallocx(mallocx(70000, MALLOCX_LG_ALIGN(16)), 70000, 0)"},
    {"forged-mark", case_forged_mark,
     "free a 40 B block, read its first word, free it again, write the word back, malloc twice"},
    {"free-misaligned", case_free_misaligned, "free a 40 B block + 3"},
    /* Beyond the list the table started with. */
    {"sdallocx-wrong-size", case_sdallocx_wrong_size, "sdallocx(malloc(40), 4000, 0), then malloc(4000) twice"},
    {"double-free-16", case_double_free_16, "free a 16 B block (a free-list class) twice, then malloc twice"},
    {"free-interior-huge", case_free_interior_huge, "free a 4 MiB block + 4096, then malloc(4 MiB)"},
    {"uaf-first-word-medium", case_uaf_first_word_medium,
     "write the first word of a freed 64 KiB block, then malloc twice"},
    {"underflow-small", case_underflow_small, "write the 16 bytes before a 40 B block, free it, malloc twice"},
    {"forged-mark-between", case_forged_mark_between,
     "as forged-mark, the word written back after the first malloc handed the block out"},
    {"realloc-freed-small", case_realloc_freed_small, "realloc a freed 40 B block to 80 B"},
    {"realloc-freed-medium", case_realloc_freed_medium, "realloc a freed 64 KiB block to 128 KiB"},
};
#define NUM_ATTACKS (sizeof kAttacks / sizeof kAttacks[0])

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < NUM_ATTACKS; i++) {
      say(kAttacks[i].name);
      say("\t");
      say(kAttacks[i].what);
      say("\n");
    }
    return 0;
  }
  if (argc == 2)
    for (size_t i = 0; i < NUM_ATTACKS; i++)
      if (strcmp(argv[1], kAttacks[i].name) == 0) {
        kAttacks[i].run();
        step("end");
        return 0;
      }
  say("usage: attacks CASE | attacks --list\n");
  return 2;
}
