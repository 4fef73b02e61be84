// SPDX-License-Identifier: BSD-2-Clause
// Decay steps over every bin, the slab arena and the chunk layer
// (small/decay.h).
#include "small/decay.h"

namespace ductile::small {

bool Decay::tick() noexcept {
  chunk::ChunkLayer& chunks = arena_->chunks();
  const uint64_t decay = chunks.options().decay_ns;
  if (decay == 0) return false;  // decay_ms:0 purges as it frees
  const uint64_t now = chunks.now_ns();
  uint64_t last = last_.load(std::memory_order_relaxed);
  const bool backlog = backlog_.load(std::memory_order_relaxed);
  if (!backlog && now - last < decay / 4 + 1) return false;
  if (!last_.compare_exchange_strong(last, now, std::memory_order_relaxed)) return backlog;  // another call steps
  const bool more = step(arena_->step_pages()).backlog;
  backlog_.store(more, std::memory_order_relaxed);
  return more;
}

Decay::StepResult Decay::step(size_t max_pages) noexcept {
  steps_.fetch_add(1, std::memory_order_relaxed);
  const bool bounded = max_pages != SIZE_MAX;
  StepResult out;
  size_t left = max_pages;
  // A bounded step starts where the last one stopped, so every bin gets its turn.
  const size_t start = bounded ? cursor_.load(std::memory_order_relaxed) % nbins_ : 0;
  for (size_t k = 0; k < nbins_; k++) {
    const size_t i = (start + k) % nbins_;
    const Bin::DecayResult r = bins_[i].decay(left);
    out.pending |= r.more;
    if (!bounded) continue;
    left -= r.pages;
    if (r.due || left == 0) {
      // Out of budget: the next step starts here (or at the next bin).
      cursor_.store(r.due ? i : i + 1, std::memory_order_relaxed);
      out.backlog = true;
      break;
    }
  }
  out.backlog |= arena_->decay(max_pages);
  chunk::ChunkLayer& chunks = arena_->chunks();
  if (bounded) out.backlog |= chunks.decay_step();
  else (void)chunks.decay();
  out.pending |= out.backlog || chunks.stats().dirty != 0;
  return out;
}

}  // namespace ductile::small
