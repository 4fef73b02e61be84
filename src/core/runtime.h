/* SPDX-License-Identifier: BSD-2-Clause */
// The core as the API layer sees it: the inline malloc and free
// (core/fast_path.h) and every other entry into the core.
//
// Size ranges: small (<= small::kMaxSmall) objects from slabs through the
// thread cache; medium (up to the huge threshold) page runs, also cached per
// thread; huge (>= the threshold) blocks of the huge layer.
#pragma once

#include "core/alloc.h"
#include "core/control.h"
#include "core/fast_path.h"
#include "core/free.h"
#include "core/realloc.h"
#include "core/startup.h"
#include "core/state.h"
