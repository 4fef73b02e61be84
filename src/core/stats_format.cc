// SPDX-License-Identifier: BSD-2-Clause
// The statistics printed: readable text and JSON for malloc_stats_print and
// the summary at exit, and malloc_info's XML.
#include "core/stats_format.h"

#include <fcntl.h>

#include <cstdlib>

#include "base/thread.h"
#include "core/options.h"
#include "core/state.h"

namespace ductile::core {

namespace {

// ---- readable ----------------------------------------------------------
void bytes_row(Out& o, const char* name, const LayerBytes& b) {
  o.str("  ").pad(name, 10).u64w(b.allocated, 16).u64w(b.active, 16).str("   (")
      .human(b.allocated).str(" / ").human(b.active).str(")\n");
}

}  // namespace

void print_text(Out& o, const StatsSnapshot& s, const char* opts) {
  char val[kMaxPrefix];
  o.str("___ Begin ductile statistics ___\n");
  o.str("Version: ").str(PACKAGE_VERSION).ch('\n');
  o.str("Options:");
  for (size_t i = 0; i < option_count(); i++) {
    const char* name = option_name(i);
    if (option_to_string(rt().opts, name, val, sizeof val)) o.ch(' ').str(name).ch(':').str(val);
  }
  const os::Features& f = rt().os.probed_features();
  const os::ThpMode thp = rt().os.thp_mode();
  o.str("\nKernel: MAP_FIXED_NOREPLACE ").str(f.map_fixed_noreplace ? "yes" : "no")
      .str(", batched purge ").str(f.batch_purge ? "yes" : "no")
      .str(", MADV_FREE ").str(f.madv_free ? "yes" : "no")
      .str(", MADV_POPULATE_WRITE ").str(f.populate_write ? "yes" : "no")
      .str(", strict overcommit ").str(f.strict_overcommit ? "yes" : "no")
      .str(", THP ")
      .str(thp == os::ThpMode::kAlways    ? "always"
           : thp == os::ThpMode::kMadvise ? "madvise"
           : thp == os::ThpMode::kNever   ? "never"
                                            : "unknown")
      .ch('\n');

  o.str("Bytes by layer:      allocated          active\n");
  bytes_row(o, "small", s.small);
  bytes_row(o, "medium", s.medium);
  bytes_row(o, "huge", s.huge);
  bytes_row(o, "total", LayerBytes{s.allocated, s.active});
  o.str("Mapped: ").u64(s.mapped).str(" (").human(s.mapped).str("), resident at most ").u64(s.resident)
      .str(" (").human(s.resident).str("), metadata ").u64(s.metadata).str(" (").human(s.metadata)
      .str(")\n");
  o.str("Retained: ").u64(s.chunk.dirty).str(" dirty (").human(s.chunk.dirty).str(", awaiting decay), ")
      .u64(s.chunk.clean).str(" clean (").human(s.chunk.clean).str(", purged or never touched)\n");
  o.str("Purged: ").u64(s.purged_bytes).str(" bytes (").human(s.purged_bytes).str(") in ")
      .u64(s.purged_ranges).str(" ranges\n");
  o.str("Chunk layer: ").u64(s.chunk.reserved).str(" bytes reserved in ").u64(s.chunk.reservations)
      .str(" reservations, ").u64(s.chunk.allocs).str(" allocs, ").u64(s.chunk.frees).str(" frees, ")
      .u64(s.chunk.alloc_at_hits).str(" at-address hits, ").u64(s.chunk.alloc_at_refusals)
      .str(" refusals\n");
  o.str("Huge layer: ").u64(s.huge_layer.allocs).str(" allocs, ").u64(s.huge_layer.frees)
      .str(" frees, ").u64(s.huge_layer.shrinks).str(" shrinks, spans ").u64(s.huge_layer.span_bytes)
      .str(" bytes (").human(s.huge_layer.span_bytes).str(")\n");
  o.str("Slab regions: ").u64(s.arena.regions).str(" held (").u64(s.arena.advised)
      .str(" advised as huge pages, ").u64(s.arena.dense)
      .str(" in the dense space), ").u64(s.arena.slab_pages).str(" pages in slabs, ")
      .u64(s.arena.dirty_pages).str(" free pages resident, ").u64(s.arena.region_allocs).str(" taken, ")
      .u64(s.arena.region_releases).str(" given back, ").u64(s.arena.purged_pages).str(" pages purged inside\n");
  o.str("Prefault helper: ").str(s.prefault.running ? "running" : "not running").str(", ")
      .u64(s.prefault.starts).str(" starts, ").u64(s.prefault.populated).str(" ranges (")
      .human(s.prefault.bytes).str(") faulted in, ").u64(s.prefault.dropped).str(" dropped\n");
  o.str("Background thread: ").str(s.background.running ? "running" : "not running").str(", ")
      .u64(s.background.starts).str(" starts, ").u64(s.background.wakeups).str(" wake-ups, ")
      .u64(s.background.steps).str(" decay steps\n");
  o.str("Huge growth by path:");
  for (size_t i = 0; i < huge::kGrowthPaths; i++) o.ch(' ').str(kGrowthNames[i]).ch(' ').u64(s.huge_layer.growth[i]);
  o.ch('\n');
  o.str("Growth by way:");
  for (size_t i = 0; i < growth::kWays; i++) o.ch(' ').str(growth::kWayNames[i]).ch(' ').u64(s.growth.events[i]);
  o.str("; ").human(s.growth.copied).str(" copied\n");
  o.str("System calls:");
  uint64_t total = 0;
  for (size_t i = 0; i < os::kCallKinds; i++) {
    o.ch(' ').str(os::call_name(static_cast<os::Call>(i))).ch(' ').u64(s.calls[i]);
    total += s.calls[i];
  }
  o.str(" (total ").u64(total).str(")\n");
  o.str("This thread: allocated ").u64(s.thread_allocated).str(", deallocated ").u64(s.thread_deallocated)
      .ch('\n');
  if (!has(opts, 'b')) {
    o.str("Small classes:    size   slabs   empty  free objs  slab allocs  slab returns\n");
    for (size_t c = 0; c < small::kNumSmall; c++) {
      const small::BinStats& b = s.bins[c];
      if (b.slabs == 0 && b.slab_allocs == 0) continue;
      o.str("              ").u64w(small::class_size(c), 8).u64w(b.slabs, 8).u64w(b.empty_slabs, 8)
          .u64w(b.free_objects, 11).u64w(b.slab_allocs, 13).u64w(b.slab_returns, 14).ch('\n');
    }
  }
  o.str("___ End ductile statistics ___\n");
}

namespace {

// ---- JSON --------------------------------------------------------------
class Json {
 public:
  explicit Json(Out& o) : o_(o) {}
  Json& open(const char* key, char bracket) {
    this->key(key);
    o_.ch(bracket);
    first_ = true;
    return *this;
  }
  Json& close(char bracket) {
    o_.ch(bracket);
    first_ = false;
    return *this;
  }
  Json& num(const char* key, uint64_t v) {
    this->key(key);
    o_.u64(v);
    return *this;
  }
  Json& boolean(const char* key, bool v) {
    this->key(key);
    o_.str(v ? "true" : "false");
    return *this;
  }
  // A number as the option table prints it (lg_prof_interval's -1 too).
  Json& number_text(const char* key, const char* v) {
    this->key(key);
    o_.str(v);
    return *this;
  }
  // Values here are option values (prof_prefix is the user's text) and
  // names of our own: quotes, backslashes and control characters escaped.
  Json& string(const char* key, const char* v) {
    this->key(key);
    o_.ch('"');
    for (; *v; v++) {
      const unsigned char c = static_cast<unsigned char>(*v);
      if (c < 0x20) {
        o_.str("\\u00").ch("0123456789abcdef"[c >> 4]).ch("0123456789abcdef"[c & 15]);
        continue;
      }
      if (*v == '"' || *v == '\\') o_.ch('\\');
      o_.ch(*v);
    }
    o_.ch('"');
    return *this;
  }
  Json& layer(const char* key, const LayerBytes& b) {
    open(key, '{').num("allocated", b.allocated).num("active", b.active);
    return close('}');
  }

 private:
  void key(const char* k) {
    if (!first_) o_.ch(',');
    first_ = false;
    if (k) o_.ch('"').str(k).str("\":");
  }
  Out& o_;
  bool first_ = true;
};

}  // namespace

void print_json(Out& o, const StatsSnapshot& s, const char* opts) {
  char val[kMaxPrefix];
  Json j(o);
  j.open(nullptr, '{').open("ductile", '{');
  j.string("version", PACKAGE_VERSION);
  j.open("options", '{');
  for (size_t i = 0; i < option_count(); i++) {
    const char* name = option_name(i);
    if (!option_to_string(rt().opts, name, val, sizeof val)) continue;
    switch (option_kind(i)) {
      case OptionKind::kNumber: j.number_text(name, val); break;
      case OptionKind::kBool: j.boolean(name, val[0] == 't'); break;
      case OptionKind::kText: j.string(name, val); break;
    }
  }
  j.close('}');
  const os::Features& f = rt().os.probed_features();
  j.open("kernel", '{')
      .boolean("map_fixed_noreplace", f.map_fixed_noreplace)
      .boolean("batch_purge", f.batch_purge)
      .boolean("madv_free", f.madv_free)
      .boolean("populate_write", f.populate_write)
      .boolean("strict_overcommit", f.strict_overcommit)
      .close('}');
  j.open("stats", '{')
      .num("allocated", s.allocated)
      .num("active", s.active)
      .num("resident", s.resident)
      .num("mapped", s.mapped)
      .num("retained", s.retained)
      .num("metadata", s.metadata)
      .num("dirty", s.chunk.dirty)
      .num("clean", s.chunk.clean)
      .num("purged_bytes", s.purged_bytes)
      .num("purged_ranges", s.purged_ranges)
      .close('}');
  j.open("layers", '{').layer("small", s.small).layer("medium", s.medium).layer("huge", s.huge).close('}');
  j.open("chunk", '{')
      .num("reserved", s.chunk.reserved)
      .num("reservations", s.chunk.reservations)
      .num("active", s.chunk.active)
      .num("allocs", s.chunk.allocs)
      .num("frees", s.chunk.frees)
      .num("alloc_at_hits", s.chunk.alloc_at_hits)
      .num("alloc_at_refusals", s.chunk.alloc_at_refusals)
      .num("purged_bytes", s.chunk.purged_bytes)
      .num("purges", s.chunk.purges)
      .close('}');
  j.open("huge", '{')
      .num("allocs", s.huge_layer.allocs)
      .num("frees", s.huge_layer.frees)
      .num("shrinks", s.huge_layer.shrinks)
      .num("active_bytes", s.huge_layer.active_bytes)
      .num("span_bytes", s.huge_layer.span_bytes);
  j.open("growth", '{');
  for (size_t i = 0; i < huge::kGrowthPaths; i++) j.num(kGrowthNames[i], s.huge_layer.growth[i]);
  j.close('}').close('}');
  j.open("growth", '{');
  for (size_t i = 0; i < growth::kWays; i++) j.num(growth::kWayNames[i], s.growth.events[i]);
  j.num("copied_bytes", s.growth.copied).close('}');
  j.open("regions", '{')
      .num("held", s.arena.regions)
      .num("advised", s.arena.advised)
      .num("dense", s.arena.dense)
      .num("slab_pages", s.arena.slab_pages)
      .num("dirty_pages", s.arena.dirty_pages)
      .num("taken", s.arena.region_allocs)
      .num("given_back", s.arena.region_releases)
      .num("purged_pages", s.arena.purged_pages)
      .close('}');
  j.open("prefault", '{')
      .boolean("running", s.prefault.running)
      .num("starts", s.prefault.starts)
      .num("requests", s.prefault.requests)
      .num("dropped", s.prefault.dropped)
      .num("populated", s.prefault.populated)
      .num("bytes", s.prefault.bytes)
      .close('}');
  j.open("background_thread", '{')
      .boolean("running", s.background.running)
      .num("starts", s.background.starts)
      .num("wakeups", s.background.wakeups)
      .num("steps", s.background.steps)
      .close('}');
  j.open("syscalls", '{');
  for (size_t i = 0; i < os::kCallKinds; i++) j.num(os::call_name(static_cast<os::Call>(i)), s.calls[i]);
  j.close('}');
  j.open("thread", '{').num("allocated", s.thread_allocated).num("deallocated", s.thread_deallocated).close('}');
  if (!has(opts, 'b')) {
    j.open("bins", '[');
    for (size_t c = 0; c < small::kNumSmall; c++) {
      const small::BinStats& b = s.bins[c];
      j.open(nullptr, '{')
          .num("size", small::class_size(c))
          .num("slabs", b.slabs)
          .num("empty_slabs", b.empty_slabs)
          .num("free_objects", b.free_objects)
          .num("slab_allocs", b.slab_allocs)
          .num("slab_returns", b.slab_returns)
          .close('}');
    }
    j.close(']');
  }
  j.close('}').close('}');
  o.ch('\n');
}

namespace {

// ---- malloc_info's XML ---------------------------------------------------
// Every value is a number or a name of our own: nothing needs escaping.
class Xml {
 public:
  explicit Xml(Out& o) : o_(o) {}
  // <name a="1" b="2"/>: open() and attributes, then end() or open_end().
  Xml& open(const char* name) {
    o_.ch('<').str(name);
    return *this;
  }
  Xml& attr(const char* name, uint64_t v) {
    o_.ch(' ').str(name).str("=\"").u64(v).ch('"');
    return *this;
  }
  Xml& attr(const char* name, const char* v) {
    o_.ch(' ').str(name).str("=\"").str(v).ch('"');
    return *this;
  }
  void end() { o_.str("/>\n"); }       // an empty element
  void open_end() { o_.str(">\n"); }   // an element with children
  void close(const char* name) { o_.str("</").str(name).str(">\n"); }

 private:
  Out& o_;
};

// glibc's elements for the heap and its totals: <total type="fast|rest">,
// <system type="current">, <aspace type="total">.
void xml_totals(Xml& x, const HeapInfo& h) {
  x.open("total").attr("type", "fast").attr("count", h.smblks).attr("size", h.fsmblks).end();
  x.open("total").attr("type", "rest").attr("count", h.ordblks)
      .attr("size", sub_or_zero(h.fordblks, h.fsmblks)).end();
}

}  // namespace

void print_xml_to(Out& o, const StatsSnapshot& s) {
  const HeapInfo h = heap_info(s);
  Xml x(o);
  x.open("malloc").attr("version", "1").open_end();
  // One heap: ductile's bins are shared by all threads.
  x.open("heap").attr("nr", uint64_t{0}).open_end();
  // Free small objects by class, as glibc lists its free chunks by size.
  x.open("sizes").open_end();
  size_t from = 1;
  for (size_t c = 0; c < small::kNumSmall; c++) {
    const size_t size = small::class_size(c);
    if (s.bins[c].free_objects != 0)
      x.open("size").attr("from", from).attr("to", size).attr("total", s.bins[c].free_objects * size)
          .attr("count", s.bins[c].free_objects).end();
    from = size + 1;
  }
  x.close("sizes");
  xml_totals(x, h);
  x.open("system").attr("type", "current").attr("size", h.arena).end();
  x.open("aspace").attr("type", "total").attr("size", s.chunk.reserved).end();
  x.close("heap");
  xml_totals(x, h);
  x.open("total").attr("type", "mmap").attr("count", h.hblks).attr("size", h.hblkhd).end();
  x.open("system").attr("type", "current").attr("size", h.arena + h.hblkhd).end();
  x.open("aspace").attr("type", "total").attr("size", s.chunk.reserved).end();
  // ductile's own figures, as malloc_stats_print reports them.
  x.open("ductile").attr("version", PACKAGE_VERSION).open_end();
  x.open("stats").attr("allocated", s.allocated).attr("active", s.active).attr("resident", s.resident)
      .attr("mapped", s.mapped).attr("retained", s.retained).attr("metadata", s.metadata).end();
  const struct {
    const char* name;
    const LayerBytes& b;
  } layers[] = {{"small", s.small}, {"medium", s.medium}, {"huge", s.huge}};
  for (const auto& l : layers)
    x.open("layer").attr("name", l.name).attr("allocated", l.b.allocated).attr("active", l.b.active).end();
  x.open("chunk").attr("reserved", s.chunk.reserved).attr("active", s.chunk.active)
      .attr("dirty", s.chunk.dirty).attr("clean", s.chunk.clean).end();
  x.open("purged").attr("bytes", s.purged_bytes).attr("ranges", s.purged_ranges).end();
  x.open("huge").attr("allocs", s.huge_layer.allocs).attr("frees", s.huge_layer.frees)
      .attr("spans", s.huge_layer.span_bytes).end();
  for (size_t i = 0; i < huge::kGrowthPaths; i++)
    x.open("growth").attr("path", kGrowthNames[i]).attr("count", s.huge_layer.growth[i]).end();
  for (size_t i = 0; i < os::kCallKinds; i++)
    x.open("syscall").attr("name", os::call_name(static_cast<os::Call>(i))).attr("count", s.calls[i]).end();
  x.close("ductile");
  x.close("malloc");
}

namespace {

void print_to(WriteFn write, void* opaque, int fd, const char* opts) {
  // On the stack (about 2 KiB plus the 1 KiB output buffer): printing must
  // not allocate.
  StatsSnapshot s;
  take_snapshot(s);
  Out o(write, opaque, fd);
  if (has(opts, 'J')) print_json(o, s, opts);
  else print_text(o, s, opts);
}

int g_exit_fd = 2;

void at_exit() { print_to(nullptr, nullptr, g_exit_fd, rt().opts.stats_print_opts); }

}  // namespace

void print_stats(WriteFn write, void* opaque, const char* opts) noexcept {
  const NoCancel no_cancel;  // write(2) would be a cancellation point
  print_to(write, opaque, 2, opts);
}

void print_xml(WriteFn write, void* opaque) noexcept {
  const NoCancel no_cancel;
  StatsSnapshot s;
  take_snapshot(s);
  Out o(write, opaque);
  print_xml_to(o, s);
}

void print_stats_at_exit_on() noexcept {
  // Above the descriptors programs commonly expect to get next (3, 4, ...).
  int fd = fcntl(2, F_DUPFD_CLOEXEC, 64);
  if (fd >= 0) g_exit_fd = fd;
  atexit(at_exit);
}

}  // namespace ductile::core
