/* SPDX-License-Identifier: BSD-2-Clause */
/* The pages of ductile's own zero-initialised storage that a program's first
 * malloc writes: its runtime, the page map's root, the small variables of
 * each layer. Each such page costs a page fault in every process, and a
 * short-lived program (a tool a shell script runs thousands of times) pays
 * them on each run. Where they lay apart (the runtime's members split by
 * the 2 MiB root, small variables each on a page of its own between two
 * tables, pages read before they were written), the first malloc made 13
 * of them resident; laid out together, 7 or 8; with the chunk layer's free
 * sets' 9.5 KiB of buckets neither cleared nor read before they hold an
 * extent, 6; with the medium depots (5 KiB, their locks' initial bytes not
 * zeroes) out of the initialised data, 5.
 *
 * The storage is the part of the allocator library's writable segment past
 * its file-backed data (found from the program headers of the object that
 * defines malloc), counted with mincore after one malloc.
 *
 * Its code is faulted in 64 KiB at a time (the kernel's fault-around), at
 * its start (_init) and end (_fini) by every process. malloc and free lie
 * in the last 16 KiB of it: between the core and the statistics, they cost
 * a window of their own.
 *
 * Exits 0 when every check holds, 77 where malloc is not ductile's (a
 * sanitizer build); prints the first failed check otherwise. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prog_check.h"

/* At most this many pages of the storage resident after the first malloc. */
#ifndef MAX_PAGES
#define MAX_PAGES 5
#endif

struct storage {
  uintptr_t base;  /* the allocator library's load address */
  uintptr_t from, to;  /* its zero-initialised storage, whole pages */
  uintptr_t code_end;  /* the end of its executable segment */
};

static int find_storage(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)size;
  struct storage* s = arg;
  if (info->dlpi_addr != s->base) return 0;
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    if (ph->p_flags & PF_X) s->code_end = s->base + ph->p_vaddr + ph->p_memsz;
    if (!(ph->p_flags & PF_W) || ph->p_memsz <= ph->p_filesz) continue;
    s->from = (s->base + ph->p_vaddr + ph->p_filesz + page - 1) & ~(page - 1);
    s->to = (s->base + ph->p_vaddr + ph->p_memsz + page - 1) & ~(page - 1);
  }
  return s->to != 0;
}

int main(void) {
  void* volatile p = malloc(100);  /* volatile: the call is made */
  CHECK(p != NULL);
  memset(p, 1, 100);

  Dl_info info;
  void* (*volatile m)(size_t) = malloc;
  CHECK(dladdr((void*)m, &info) != 0);
  /* A sanitizer build leaves malloc to the sanitizer's runtime: nothing of
   * ductile's to count (exit 77: skipped). */
  Dl_info ours;
  void* ctl = dlsym(RTLD_DEFAULT, "mallctl");
  if (ctl == NULL || dladdr(ctl, &ours) == 0 || ours.dli_fbase != info.dli_fbase) {
    printf("malloc is not ductile's here (%s)\n", info.dli_fname);
    return 77;
  }
  struct storage s = {(uintptr_t)info.dli_fbase, 0, 0, 0};
  CHECK(dl_iterate_phdr(find_storage, &s) == 1);
  CHECK(s.to > s.from);
  void (*volatile f)(void*) = free;
  CHECK(s.code_end > (uintptr_t)m && s.code_end - (uintptr_t)m <= 16 * 1024);
  CHECK(s.code_end > (uintptr_t)f && s.code_end - (uintptr_t)f <= 16 * 1024);

  const long page = sysconf(_SC_PAGESIZE);
  const size_t n = (s.to - s.from) / (size_t)page;
  unsigned char* vec = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(vec != MAP_FAILED);
  CHECK(mincore((void*)s.from, s.to - s.from, vec) == 0);
  size_t resident = 0;
  for (size_t i = 0; i < n; i++) resident += vec[i] & 1;
  if (resident > MAX_PAGES) {
    fprintf(stderr, "%zu of %zu pages of %s's storage resident after the first malloc (at most %d):",
            resident, n, info.dli_fname, MAX_PAGES);
    for (size_t i = 0; i < n; i++)
      if (vec[i] & 1) fprintf(stderr, " +0x%zx", (size_t)(s.from - s.base) + i * (size_t)page);
    fprintf(stderr, "\n");
  }
  CHECK(resident >= 1);  /* the first malloc made the runtime there */
  CHECK(resident <= MAX_PAGES);
  free(p);
  return 0;
}
