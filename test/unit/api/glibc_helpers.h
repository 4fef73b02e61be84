#include <dlfcn.h>




// The C library's own definition of `name`.
template <typename F>
F from_libc(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// Keeps the compiler from pairing a malloc with its free and dropping both.
  void* volatile v = p;
  return v;
}

