/* SPDX-License-Identifier: BSD-2-Clause */
/* ductile::vector's growth: the member functions that make room for more
 * elements -- regrow (a relocatable vector's xallocx, then rallocx; any
 * other's new buffer, its elements moved in) and the appends and
 * emplace_back built on it. Included by <ductile/vector.h>, which declares
 * them; include that one. */
#ifndef DUCTILE_VECTOR_GROWTH_H
#define DUCTILE_VECTOR_GROWTH_H

#include <ductile/vector.h>

namespace ductile {

/* Makes the buffer hold at least n elements (n >= size(), n > 0), the
 * contents unchanged; on a throw nothing has changed (std::bad_alloc, or
 * an element's copy where its move may throw). A relocatable vector grows
 * with xallocx, in place, then rallocx, which moves the bytes only if it
 * must; another moves its elements into a new buffer, as std::vector. */
template <class T>
void vector<T>::regrow(size_type n) {
  if constexpr (is_relocatable_v<T>) {
    if (b_ != nullptr) {
      const std::size_t want = n * sizeof(T);
      const std::size_t got = ductile_xallocx(b_, want, 0, flags());
      if (got >= want) {
        c_ = b_ + got / sizeof(T);
        return;
      }
      void* q = ductile_rallocx(b_, want, flags());
      if (q == nullptr) throw std::bad_alloc();
      adopt(static_cast<T*>(q), size());
      return;
    }
  }
  size_type cap;
  T* q = allocate(n, &cap);
  T* qe;
  try {
    qe = move_into(q);
  } catch (...) {
    deallocate(q, cap);
    throw;
  }
  release();
  b_ = q;
  e_ = qe;
  c_ = q + cap;
}

/* Moves (or copies, where moving may throw and copying can be had) the
 * elements into the raw block q; returns past the last. On a throw the
 * ones made in q are destroyed and ours are as before. */
template <class T>
T* vector<T>::move_into(T* q) {
  T* d = q;
  try {
    for (T* s = b_; s != e_; ++s, ++d) ::new (static_cast<void*>(d)) T(std::move_if_noexcept(*s));
  } catch (...) {
    for (T* x = q; x != d; ++x) x->~T();
    throw;
  }
  return d;
}

/* emplace_back when the buffer is full; the arguments may refer to our
 * elements. */
template <class T>
template <class... Args>
typename vector<T>::reference vector<T>::emplace_back_grow(Args&&... args) {
  if constexpr (is_relocatable_v<T>) {
    // The new element first (it may throw, and its arguments may be in
    // the buffer that rallocx moves), then the buffer grows, then the
    // element is relocated into it: nothing throws once it has grown.
    const size_type n = next_capacity(1);
    alignas(T) unsigned char raw[sizeof(T)];
    T* made = ::new (static_cast<void*>(raw)) T(std::forward<Args>(args)...);
    try {
      regrow(n);
    } catch (...) {
      made->~T();
      throw;
    }
    std::memcpy(static_cast<void*>(e_), static_cast<const void*>(made), sizeof(T));
    return *e_++;
  } else {
    append_constructed(1, [&](T* p, size_type) { ::new (static_cast<void*>(p)) T(std::forward<Args>(args)...); });
    return e_[-1];
  }
}

/* Constructs n elements past the end with make(T* where, index), growing
 * the buffer first if need be. On a throw the contents are as they were;
 * where the buffer had to grow, a relocatable vector keeps its grown
 * buffer (it grew before the elements were made, and make must then not
 * read our elements), another is left untouched: as std::vector, its new
 * elements are made in the new buffer first, while what they are made
 * from is still where it was, and the others moved in after. */
template <class T>
template <class Make>
void vector<T>::append_constructed(size_type n, Make make) {
  if (n <= capacity() - size()) {
    construct_n(e_, n, make);
    e_ += n;
    return;
  }
  const size_type want = next_capacity(n);
  if constexpr (is_relocatable_v<T>) {
    regrow(want);
    construct_n(e_, n, make);
    e_ += n;
  } else {
    size_type cap;
    T* q = allocate(want, &cap);
    T* at = q + size();
    try {
      construct_n(at, n, make);
      try {
        move_into(q);
      } catch (...) {
        for (T* x = at; x != at + n; ++x) x->~T();
        throw;
      }
    } catch (...) {
      deallocate(q, cap);
      throw;
    }
    release();
    b_ = q;
    e_ = at + n;
    c_ = q + cap;
  }
}

/* Appends [first, last), which is not ours. On a throw the contents are as
 * before. */
template <class T>
template <class It>
void vector<T>::append_range(It first, It last) {
  if constexpr (is_forward_v<It>) {
    const size_type n = static_cast<size_type>(std::distance(first, last));
    append_constructed(n, [&first](T* p, size_type) {
      ::new (static_cast<void*>(p)) T(*first);
      ++first;
    });
  } else {
    const size_type old = size();
    try {
      for (; first != last; ++first) emplace_back(*first);
    } catch (...) {
      destroy_from(b_ + old);
      throw;
    }
  }
}

}  // namespace ductile

#endif /* DUCTILE_VECTOR_GROWTH_H */
