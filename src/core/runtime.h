/* SPDX-License-Identifier: BSD-2-Clause */
//
// Size ranges: small (<= small::kMaxSmall) objects from slabs through the
// thread cache; medium (up to the huge threshold) page runs, also cached per
// thread; huge (>= the threshold) blocks of the huge layer.
#pragma once

