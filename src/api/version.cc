// SPDX-License-Identifier: BSD-2-Clause
// ductile_version: the library's version string.
#include "base/common.h"
#include "ductile/ductile.h"

extern "C" DUCTILE_EXPORT const char* ductile_version(void) { return PACKAGE_VERSION; }
