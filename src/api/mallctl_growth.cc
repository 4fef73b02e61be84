// SPDX-License-Identifier: BSD-2-Clause
// mallctl's leaves for how blocks grow: the huge layer's growth paths
// (ductile.huge.growth.*), the process's ways of growth and bytes copied
// (ductile.growth.*), the growth profile's options and its dump
// (prof.growth.dump). The tree is in mallctl.cc.
#include <errno.h>

#include "api/mallctl_leaves.h"
#include "core/growth.h"
#include "core/runtime.h"

namespace ductile::ctl {

template <size_t Path>
int ctl_growth(Req& r, const size_t*, size_t) {
  if (writes(r)) return EPERM;
  uint64_t v = core::rt().huge.stats().growth[Path];
  return read_value(r, v);
}
template int ctl_growth<0>(Req&, const size_t*, size_t);
template int ctl_growth<1>(Req&, const size_t*, size_t);
template int ctl_growth<2>(Req&, const size_t*, size_t);
template int ctl_growth<3>(Req&, const size_t*, size_t);
template int ctl_growth<4>(Req&, const size_t*, size_t);

// ENOENT in a --disable-stats build, which counts no growth (as
// thread.allocated).
template <size_t I>
int ctl_grew(Req& r, const size_t*, size_t) {
  if (!kStats) return ENOENT;
  const core::growth::Totals t = core::growth::totals();
  const uint64_t v = I < core::growth::kWays ? t.events[I] : t.copied;
  return read_only(r, v);
}
template int ctl_grew<0>(Req&, const size_t*, size_t);
template int ctl_grew<1>(Req&, const size_t*, size_t);
template int ctl_grew<2>(Req&, const size_t*, size_t);
template int ctl_grew<3>(Req&, const size_t*, size_t);
template int ctl_grew<4>(Req&, const size_t*, size_t);
template int ctl_grew<5>(Req&, const size_t*, size_t);
template int ctl_grew<core::growth::kCopied>(Req&, const size_t*, size_t);

int ctl_opt_growth_prof(Req& r, const size_t*, size_t) { return read_only(r, core::rt().opts.growth_prof); }
int ctl_opt_lg_growth_sample(Req& r, const size_t*, size_t) {
  return read_only(r, core::rt().opts.lg_growth_sample);
}

// prof.growth.dump: as prof.dump, a write of a file name (NULL: a name from
// prof_prefix); ENOENT without growth_prof.
int ctl_prof_growth_dump(Req& r, const size_t*, size_t) {
  if (!kProf || !core::growth::g_on) return ENOENT;
  if (r.oldp != nullptr || r.oldlenp != nullptr) return EPERM;
  const char* name = nullptr;
  bool written;
  if (int e = take_write(r, &name, &written)) return e;
  return core::growth::dump(name);
}

}  // namespace ductile::ctl
