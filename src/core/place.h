

namespace ductile::core {

// The smallest class >= size whose objects are `align`-aligned (align <= a
// thread.allocated / thread.deallocated for the paths that bypass the
// thread cache's own counting: huge blocks, page-aligned medium blocks and
// in-place resizes (counted as jemalloc does: the new size allocated, the
// old one deallocated).

// Where a request of `size` bytes aligned to `align` (a power of two, or 0/1
// for none) is served, and the usable size it gets: alloc_impl serves it
// there, nallocx answers `usable`, and rallocx leaves a block exactly so.
struct Placement {
  enum Kind : uint8_t { kClass, kAlignedMedium, kHuge } kind;
  size_t cls;     // kClass and kAlignedMedium
  size_t usable;
};

}  // namespace ductile::core
