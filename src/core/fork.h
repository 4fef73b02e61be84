/* SPDX-License-Identifier: BSD-2-Clause */
// The fork handlers: what the parent holds across a fork, and what the child
// re-creates.
#pragma once

namespace ductile::core {

void prefork() noexcept;
void postfork_parent() noexcept;
void postfork_child() noexcept;

}  // namespace ductile::core
