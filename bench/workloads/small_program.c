/* SPDX-License-Identifier: BSD-2-Clause */
/* small-program: a single-threaded program with about 2 MB live, whose
 * footprint is what counts (written for ductile).
 *
 * Shaped like a logic minimiser: a generation of 8 000 terms (a header and
 * 8-200 bytes of literals each, about 0.9 MB) is combined pairwise into the
 * next generation, which is indexed in a hash table that grows by realloc;
 * then the old generation and its table are freed. Two generations are
 * live at the peak, about 2 MB in all. 100 generations. The program's own
 * memory is small, so the allocator's start-up costs (first regions,
 * metadata, caches) show in the peak RSS, the figure this row is for.
 *
 * Usage: small_program [scale]   (default 1)
 * Work: 100 * scale generations. */
#include "wl.h"

#define TERMS 8000

typedef struct term {
  struct term *next;  /* hash chain */
  uint32_t hash, len;
  unsigned char lit[];
} term;

typedef struct {
  term **t;     /* TERMS terms */
  term **slot;  /* hash table, grown by realloc */
  size_t nslot;
} generation;

static uint32_t hash_of(const unsigned char *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static void index_term(generation *g, term *t, size_t count) {
  if ((count + 1) * 2 > g->nslot) {  /* grow and rehash, as a hash set does */
    size_t n = g->nslot ? g->nslot * 2 : 64;
    term **s = (term **)realloc(g->slot, n * sizeof *s);
    if (!s) abort();
    memset(s, 0, n * sizeof *s);
    g->slot = s;
    g->nslot = n;
    for (size_t i = 0; i < count; i++) {
      term *u = g->t[i];
      u->next = s[u->hash & (n - 1)];
      s[u->hash & (n - 1)] = u;
    }
  }
  t->next = g->slot[t->hash & (g->nslot - 1)];
  g->slot[t->hash & (g->nslot - 1)] = t;
}

static term *make_term(const term *a, const term *b, wl_rng *r) {
  uint32_t len = (uint32_t)wl_range(r, 8, 200);
  term *t = (term *)malloc(sizeof *t + len);
  if (!t) abort();
  t->len = len;
  for (uint32_t i = 0; i < len; i++)
    t->lit[i] = (unsigned char)((a ? a->lit[i % a->len] : i) ^ (b ? b->lit[i % b->len] : 0x5a));
  t->hash = hash_of(t->lit, len);
  return t;
}

static void free_generation(generation *g) {
  for (size_t i = 0; i < TERMS; i++) free(g->t[i]);
  free(g->t);
  free(g->slot);
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long gens = (long)(100 * scale);
  if (gens < 1) gens = 1;
  wl_rng r;
  wl_seed(&r, 5);
  double t0 = wl_now();
  generation cur = {0, 0, 0};
  cur.t = (term **)malloc(TERMS * sizeof(term *));
  if (!cur.t) abort();
  for (size_t i = 0; i < TERMS; i++) {
    cur.t[i] = make_term(NULL, NULL, &r);
    index_term(&cur, cur.t[i], i);
  }
  unsigned long acc = 0;
  for (long g = 0; g < gens; g++) {
    generation next = {0, 0, 0};
    next.t = (term **)malloc(TERMS * sizeof(term *));
    if (!next.t) abort();
    for (size_t i = 0; i < TERMS; i++) {
      const term *a = cur.t[wl_below(&r, TERMS)];
      const term *b = cur.t[wl_below(&r, TERMS)];
      next.t[i] = make_term(a, b, &r);
      index_term(&next, next.t[i], i);
    }
    for (const term *t = cur.slot[next.t[0]->hash & (cur.nslot - 1)]; t; t = t->next) acc += t->len;
    free_generation(&cur);
    cur = next;
  }
  free_generation(&cur);
  double secs = wl_now() - t0;
  char extra[64];
  snprintf(extra, sizeof extra, "generations=%ld check=%lu", gens, acc % 1000);
  wl_report("small-program", secs, extra);
  return 0;
}
