/* SPDX-License-Identifier: BSD-2-Clause */
/* ductile::vector<T>: a C++17 vector, header-only, whose buffer grows in
 * place.
 *
 * std::vector never calls realloc: to grow, it allocates a new buffer, moves
 * every element and frees the old one, so a program pays the copy at every
 * doubling and holds both buffers at once. ductile::vector keeps
 * std::vector's interface for the common operations, but for element types
 * that are relocatable -- trivially copyable ones, and any type a program
 * marks with ductile::is_relocatable -- it grows its buffer with xallocx
 * (in place: no copy, no move) and, where that fails, with rallocx (which
 * in ductile still grows a huge block in place, or moves its pages with
 * mremap, and copies only as a last resort). Other element types are
 * handled as std::vector handles them: a new buffer, the elements moved
 * (std::move_if_noexcept, for the strong guarantee), the old buffer freed.
 *
 * Differences from std::vector:
 *  - no allocator parameter: the buffer always comes from ductile
 *    (ductile_mallocx and friends, the ductile_ names, so that a program
 *    that also links jemalloc still grows in ductile);
 *  - iterators are plain pointers;
 *  - vector<bool> is a vector of bool, not a bitset;
 *  - capacity() is the whole usable size of the buffer (sallocx) in
 *    elements, so it may exceed what reserve() asked for;
 *  - shrink_to_fit() leaves the vector as it was when it cannot shrink
 *    (no memory, or an element's move throws) rather than throwing.
 * Exception guarantees are std::vector's; for relocatable types growth
 * moves no element, so push_back, emplace_back, reserve and resize never
 * throw after the buffer has grown: on a throw their contents are as
 * before. Allocation failure throws std::bad_alloc; a size past max_size()
 * std::length_error.
 *
 * Needs the program linked with -lductile (pkg-config --cflags --libs
 * ductile). docs/api.md ("ductile::vector") has the details. */
#ifndef DUCTILE_VECTOR_H
#define DUCTILE_VECTOR_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <ductile/ductile.h>

namespace ductile {

/* Whether a T may be moved to another address by copying its bytes, the
 * source then being treated as gone (no destructor run): true for trivially
 * copyable types. A program may specialise it for its own types that hold
 * no pointer into themselves (a struct of a std::unique_ptr and integers,
 * say); libstdc++'s std::string, which points into itself, is not one. */
template <class T>
struct is_relocatable : std::is_trivially_copyable<T> {};

template <class T>
inline constexpr bool is_relocatable_v = is_relocatable<T>::value;

template <class T>
class vector {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

 private:
  template <class It>
  using if_input_iterator = std::enable_if_t<
      std::is_convertible_v<typename std::iterator_traits<It>::iterator_category, std::input_iterator_tag>, int>;
  template <class It>
  static constexpr bool is_forward_v =
      std::is_convertible_v<typename std::iterator_traits<It>::iterator_category, std::forward_iterator_tag>;

 public:
  /* ---- construction, assignment, destruction ------------------------- */
  vector() noexcept = default;
  // Each constructor that allocates delegates to the default one first, so
  // that the destructor frees the buffer if an element's constructor throws.
  explicit vector(size_type n) : vector() {
    append_constructed(n, [](T* p, size_type) { ::new (static_cast<void*>(p)) T(); });
  }
  vector(size_type n, const T& value) : vector() {
    append_constructed(n, copies_of(value));
  }
  template <class It, if_input_iterator<It> = 0>
  vector(It first, It last) : vector() {
    append_range(first, last);
  }
  vector(std::initializer_list<T> il) : vector(il.begin(), il.end()) {}
  vector(const vector& other) : vector(other.begin(), other.end()) {}
  vector(vector&& other) noexcept : b_(other.b_), e_(other.e_), c_(other.c_) {
    other.b_ = other.e_ = other.c_ = nullptr;
  }
  ~vector() { release(); }

  vector& operator=(const vector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  vector& operator=(vector&& other) noexcept {
    if (this != &other) {
      release();
      b_ = other.b_;
      e_ = other.e_;
      c_ = other.c_;
      other.b_ = other.e_ = other.c_ = nullptr;
    }
    return *this;
  }
  vector& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }

  void assign(size_type n, const T& value) {
    if (n > capacity()) {
      vector fresh(n, value);
      swap(fresh);
      return;
    }
    const size_type s = size();
    std::fill_n(b_, std::min(n, s), value);  // value may be one of ours: it is assigned itself
    if (n > s) append_constructed(n - s, copies_of(value));
    else destroy_from(b_ + n);
  }
  template <class It, if_input_iterator<It> = 0>
  void assign(It first, It last) {
    if constexpr (is_forward_v<It>) {
      const size_type n = static_cast<size_type>(std::distance(first, last));
      if (n > capacity()) {
        vector fresh(first, last);
        swap(fresh);
        return;
      }
      T* p = b_;
      for (; p != e_ && first != last; ++p, ++first) *p = *first;
      if (first == last) destroy_from(p);
      else append_range(first, last);
    } else {
      clear();
      append_range(first, last);
    }
  }
  void assign(std::initializer_list<T> il) { assign(il.begin(), il.end()); }

  /* ---- element access ------------------------------------------------ */
  reference at(size_type i) {
    if (i >= size()) throw std::out_of_range("ductile::vector::at");
    return b_[i];
  }
  const_reference at(size_type i) const {
    if (i >= size()) throw std::out_of_range("ductile::vector::at");
    return b_[i];
  }
  reference operator[](size_type i) noexcept { return b_[i]; }
  const_reference operator[](size_type i) const noexcept { return b_[i]; }
  reference front() noexcept { return *b_; }
  const_reference front() const noexcept { return *b_; }
  reference back() noexcept { return e_[-1]; }
  const_reference back() const noexcept { return e_[-1]; }
  T* data() noexcept { return b_; }
  const T* data() const noexcept { return b_; }

  /* ---- iterators ------------------------------------------------------ */
  iterator begin() noexcept { return b_; }
  const_iterator begin() const noexcept { return b_; }
  const_iterator cbegin() const noexcept { return b_; }
  iterator end() noexcept { return e_; }
  const_iterator end() const noexcept { return e_; }
  const_iterator cend() const noexcept { return e_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(e_); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(e_); }
  const_reverse_iterator crbegin() const noexcept { return const_reverse_iterator(e_); }
  reverse_iterator rend() noexcept { return reverse_iterator(b_); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(b_); }
  const_reverse_iterator crend() const noexcept { return const_reverse_iterator(b_); }

  /* ---- capacity ------------------------------------------------------- */
  [[nodiscard]] bool empty() const noexcept { return b_ == e_; }
  size_type size() const noexcept { return static_cast<size_type>(e_ - b_); }
  size_type capacity() const noexcept { return static_cast<size_type>(c_ - b_); }
  /* The most elements one block can hold: blocks stop at PTRDIFF_MAX bytes. */
  static constexpr size_type max_size() noexcept { return static_cast<size_type>(PTRDIFF_MAX) / sizeof(T); }

  void reserve(size_type n) {
    if (n > max_size()) throw std::length_error("ductile::vector::reserve");
    if (n > capacity()) regrow(n);
  }
  /* Gives back what the elements do not use: a relocatable vector's buffer
   * shrinks through rallocx (in place where the allocator can), another's
   * is replaced by one of the right size. An empty vector frees its buffer.
   * On failure the vector is left as it was. */
  void shrink_to_fit() noexcept {
    if (e_ == c_) return;
    if (b_ == e_) {
      release();
      return;
    }
    // A block for size() elements would be no smaller: nothing to gain.
    if (ductile_nallocx(size() * sizeof(T), flags()) / sizeof(T) >= capacity()) return;
    if constexpr (is_relocatable_v<T>) {
      void* q = ductile_rallocx(b_, size() * sizeof(T), flags());
      if (q != nullptr) adopt(static_cast<T*>(q), size());
    } else {
      try {
        regrow(size());
      } catch (...) {
        // Non-binding, as std::vector's: the vector stays as it was.
      }
    }
  }

  /* ---- modifiers ------------------------------------------------------ */
  void clear() noexcept { destroy_from(b_); }

  void push_back(const T& value) { emplace_back(value); }
  void push_back(T&& value) { emplace_back(std::move(value)); }
  template <class... Args>
  reference emplace_back(Args&&... args) {
    if (e_ != c_) {
      ::new (static_cast<void*>(e_)) T(std::forward<Args>(args)...);
      return *e_++;
    }
    return emplace_back_grow(std::forward<Args>(args)...);
  }
  void pop_back() noexcept {
    --e_;
    e_->~T();
  }

  iterator insert(const_iterator pos, const T& value) { return emplace(pos, value); }
  iterator insert(const_iterator pos, T&& value) { return emplace(pos, std::move(value)); }
  iterator insert(const_iterator pos, size_type n, const T& value) {
    const size_type i = index_of(pos);
    if (n == 0) return b_ + i;
    const size_type old = size();
    if (!is_relocatable_v<T> || n <= capacity() - old) {
      append_constructed(n, copies_of(value));
    } else {
      const T copy(value);  // value may be one of ours, which rallocx moves
      append_constructed(n, copies_of(copy));
    }
    std::rotate(b_ + i, b_ + old, e_);
    return b_ + i;
  }
  template <class It, if_input_iterator<It> = 0>
  iterator insert(const_iterator pos, It first, It last) {
    const size_type i = index_of(pos);
    const size_type old = size();
    append_range(first, last);
    std::rotate(b_ + i, b_ + old, e_);
    return b_ + i;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> il) { return insert(pos, il.begin(), il.end()); }
  template <class... Args>
  iterator emplace(const_iterator pos, Args&&... args) {
    const size_type i = index_of(pos);
    if (i == size()) {
      emplace_back(std::forward<Args>(args)...);
      return b_ + i;
    }
    T value(std::forward<Args>(args)...);  // the arguments may refer to elements that move
    if (e_ == c_) regrow(next_capacity(1));
    ::new (static_cast<void*>(e_)) T(std::move(e_[-1]));
    ++e_;
    std::move_backward(b_ + i, e_ - 2, e_ - 1);
    b_[i] = std::move(value);
    return b_ + i;
  }

  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    T* f = b_ + (first - b_);
    if (first != last) destroy_from(std::move(b_ + (last - b_), e_, f));
    return f;
  }

  void resize(size_type n) {
    const size_type s = size();
    if (n <= s) {
      destroy_from(b_ + n);
      return;
    }
    append_constructed(n - s, [](T* p, size_type) { ::new (static_cast<void*>(p)) T(); });
  }
  void resize(size_type n, const T& value) {
    const size_type s = size();
    if (n <= s) {
      destroy_from(b_ + n);
      return;
    }
    if (!is_relocatable_v<T> || n - s <= capacity() - s) {
      append_constructed(n - s, copies_of(value));
    } else {
      const T copy(value);  // value may be one of ours, which rallocx moves
      append_constructed(n - s, copies_of(copy));
    }
  }

  void swap(vector& other) noexcept {
    std::swap(b_, other.b_);
    std::swap(e_, other.e_);
    std::swap(c_, other.c_);
  }

 private:
  T* b_ = nullptr;  // the buffer, and the first element
  T* e_ = nullptr;  // past the last element
  T* c_ = nullptr;  // past the last element the buffer holds

  /* The flags of every call for the buffer: MALLOCX_LG_ALIGN where T needs
   * more than the 16 bytes every block of 16 bytes or more has. A function,
   * so that the class can be named with an incomplete T, as std::vector. */
  static constexpr int flags() noexcept {
    if (alignof(T) <= alignof(std::max_align_t)) return 0;
    int lg = 0;
    while ((std::size_t{1} << lg) < alignof(T)) ++lg;
    return MALLOCX_LG_ALIGN(lg);
  }

  size_type index_of(const_iterator pos) const noexcept { return static_cast<size_type>(pos - b_); }
  /* For append_constructed: copies of value. */
  static auto copies_of(const T& value) {
    return [&value](T* p, size_type) { ::new (static_cast<void*>(p)) T(value); };
  }

  /* The capacity for `more` elements past size(): double the capacity, or
   * what is needed if that is more. Doubling is what makes a huge buffer
   * grow in place in ductile: a huge block's span has headroom of at least
   * the block's own size (more for a block that has grown), so xallocx to
   * twice the size is served from the headroom without a system call. A
   * smaller factor (folly's 1.5) helps allocators that cannot grow in place
   * reuse freed blocks; here it would only mean more growth steps. */
  size_type next_capacity(size_type more) const {
    const size_type s = size(), most = max_size();
    if (more > most - s) throw std::length_error("ductile::vector");
    const size_type cap = capacity();
    const size_type doubled = cap > most / 2 ? most : 2 * cap;
    return std::max(doubled, s + more);
  }

  /* A block for at least n elements (0 < n <= max_size()); its capacity in
   * elements, the block's whole usable size, in *cap. */
  static T* allocate(size_type n, size_type* cap) {
    void* p = ductile_mallocx(n * sizeof(T), flags());
    if (p == nullptr) throw std::bad_alloc();
    *cap = ductile_sallocx(p, flags()) / sizeof(T);
    return static_cast<T*>(p);
  }
  static void deallocate(T* p, size_type cap) noexcept {
    if (p != nullptr) ductile_sdallocx(p, cap * sizeof(T), flags());
  }
  /* Takes q, holding our n elements, as the buffer (rallocx's answer). */
  void adopt(T* q, size_type n) noexcept {
    b_ = q;
    e_ = q + n;
    c_ = q + ductile_sallocx(q, flags()) / sizeof(T);
  }
  void release() noexcept {
    destroy_from(b_);
    deallocate(b_, capacity());
    b_ = e_ = c_ = nullptr;
  }
  void destroy_from(T* p) noexcept {
    if constexpr (!std::is_trivially_destructible_v<T>)
      for (T* q = p; q != e_; ++q) q->~T();
    e_ = p;
  }

  /* How the buffer grows, defined in <ductile/vector_growth.h>: regrow
   * (xallocx, then rallocx, or a new buffer and the elements moved),
   * move_into, emplace_back when full, append_constructed, append_range. */
  void regrow(size_type n);
  T* move_into(T* q);
  template <class... Args>
  reference emplace_back_grow(Args&&... args);

  /* Constructs n elements at p with make(T* where, index); on a throw the
   * ones made are destroyed. */
  template <class Make>
  static void construct_n(T* p, size_type n, Make& make) {
    size_type i = 0;
    try {
      for (; i < n; ++i) make(p + i, i);
    } catch (...) {
      if constexpr (!std::is_trivially_destructible_v<T>)
        for (size_type k = 0; k < i; ++k) p[k].~T();
      throw;
    }
  }

  template <class Make>
  void append_constructed(size_type n, Make make);
  template <class It>
  void append_range(It first, It last);
};

template <class It, class T = typename std::iterator_traits<It>::value_type>
vector(It, It) -> vector<T>;

template <class T>
void swap(vector<T>& a, vector<T>& b) noexcept {
  a.swap(b);
}

template <class T>
bool operator==(const vector<T>& a, const vector<T>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}
template <class T>
bool operator!=(const vector<T>& a, const vector<T>& b) {
  return !(a == b);
}
template <class T>
bool operator<(const vector<T>& a, const vector<T>& b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
}
template <class T>
bool operator>(const vector<T>& a, const vector<T>& b) {
  return b < a;
}
template <class T>
bool operator<=(const vector<T>& a, const vector<T>& b) {
  return !(b < a);
}
template <class T>
bool operator>=(const vector<T>& a, const vector<T>& b) {
  return !(a < b);
}

}  // namespace ductile

#include <ductile/vector_growth.h>

#endif /* DUCTILE_VECTOR_H */
