/* SPDX-License-Identifier: BSD-2-Clause */
// The idle caches' collection: the background thread's step over the
// medium blocks that lie in thread caches.
#pragma once

#include "base/lock.h"

namespace ductile::core {

extern Mutex g_collect_lock;  // one collection at a time
bool background_step() noexcept;
void background_arm() noexcept;

}  // namespace ductile::core
