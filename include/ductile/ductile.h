/* ductile: a general-purpose memory allocator whose huge allocations grow in place.
 *
 * The public C API. When libductile is preloaded or linked, the standard
 * allocation functions (malloc, free, ...) are ductile's; every function is
 * also available with a ductile_ prefix. */
#ifndef DUCTILE_DUCTILE_H
#define DUCTILE_DUCTILE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *ductile_version(void);

#ifdef __cplusplus
}
#endif

#endif /* DUCTILE_DUCTILE_H */
