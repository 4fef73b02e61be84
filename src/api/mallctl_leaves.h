#include <errno.h>

#include <cstring>



struct Req {
  void* oldp;
  size_t* oldlenp;
  void* newp;
  size_t newlen;
};

using Ctl = int (*)(Req& r, const size_t* mib, size_t miblen);

struct Node {
  const char* name;
  Ctl ctl;                 // leaves only
  const Node* kids;        // named children
  size_t nkids;
  const Node* indexed;     // the child an integer component leads to
  bool (*index_ok)(size_t);
};

// ---- jemalloc's read/write rules ---------------------------------------
template <typename T>
int read_value(Req& r, const T& v) {
  if (r.oldp == nullptr || r.oldlenp == nullptr) return 0;
  if (*r.oldlenp != sizeof(T)) {
    size_t n = *r.oldlenp < sizeof(T) ? *r.oldlenp : sizeof(T);
    std::memcpy(r.oldp, &v, n);
    *r.oldlenp = n;
    return EINVAL;
  }
  std::memcpy(r.oldp, &v, sizeof(T));
  return 0;
}

// 0, or EINVAL for a write of the wrong size; `out` is set when written.
template <typename T>
int take_write(Req& r, T* out, bool* written) {
  *written = false;
  if (r.newp == nullptr) return 0;
  if (r.newlen != sizeof(T)) return EINVAL;
  std::memcpy(out, r.newp, sizeof(T));
  *written = true;
  return 0;
}


template <typename T>
int read_only(Req& r, const T& v) {
  if (writes(r)) return EPERM;
  return read_value(r, v);
}

// A void value: an action, neither read nor written.
  return r.oldp != nullptr || r.oldlenp != nullptr || writes(r) ? EPERM : 0;
}






