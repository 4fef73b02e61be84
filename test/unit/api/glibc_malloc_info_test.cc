// SPDX-License-Identifier: BSD-2-Clause
// glibc's malloc_info as ductile answers it (api/glibc.cc): well-formed XML with the figures,
// glibc's answer to options, and a stream that allocates.
//
// This program links the library's objects, so ductile is the allocator of the whole
// test process; glibc's own functions, the reference for "as glibc", are looked up
// past it (RTLD_NEXT).
#include <errno.h>
#include <malloc.h>
#include <stdio.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/xml_check.h"
#include "unit/api/glibc_helpers.h"

namespace ductile {
namespace {

using test::from_libc;
using test::kMiB;
using test::opaque;

// ---- malloc_info ---------------------------------------------------------

// A stream into a fixed buffer that allocates nothing (unbuffered), so the
// figures malloc_info writes are those of the moment it was called.
struct Fixed {
  char text[1 << 16];
  size_t len = 0;
};
ssize_t fixed_write(void* cookie, const char* buf, size_t n) {
  auto* f = static_cast<Fixed*>(cookie);
  if (f->len + n >= sizeof f->text) return -1;
  std::memcpy(f->text + f->len, buf, n);
  f->len += n;
  f->text[f->len] = '\0';
  return static_cast<ssize_t>(n);
}
FILE* open_fixed(Fixed* f) {
  cookie_io_functions_t io = {nullptr, fixed_write, nullptr, nullptr};
  FILE* fp = fopencookie(f, "w", io);
  if (fp != nullptr) setvbuf(fp, nullptr, _IONBF, 0);
  return fp;
}

// The value of attribute `attr` of the first element that starts with `start`
// (e.g. "<total type=\"mmap\""), at or after `from`; -1 if there is none.
long long attr_of(const std::string& xml, const std::string& start, const char* attr, size_t from = 0) {
  size_t at = xml.find(start, from);
  if (at == std::string::npos) return -1;
  size_t end = xml.find('>', at);
  std::string key = std::string(" ") + attr + "=\"";
  size_t k = xml.find(key, at);
  if (k == std::string::npos || k > end) return -1;
  return std::strtoll(xml.c_str() + k + key.size(), nullptr, 10);
}

TEST(MallocInfo, IsWellFormedXmlWithTheFigures) {
  void* h = opaque(malloc(6 * kMiB));
  std::vector<void*> v;
  for (int i = 0; i < 300; i++) v.push_back(opaque(malloc(24)));
  for (void* p : v) free(p);  // free small objects to list
  static Fixed out;
  out.len = 0;
  FILE* fp = open_fixed(&out);
  ASSERT_NE(fp, nullptr);
  const struct mallinfo2 m = mallinfo2();
  core::StatsSnapshot s;
  core::take_snapshot(s);
  errno = 0;
  EXPECT_EQ(ductile_malloc_info(0, fp), 0);
  EXPECT_EQ(errno, 0);
  fclose(fp);
  const std::string xml(out.text, out.len);
  ASSERT_TRUE(xml_check::valid(xml)) << xml;
  EXPECT_EQ(xml.rfind("<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", 0), 0u) << xml;
  EXPECT_EQ(xml.substr(xml.size() - 10), "</malloc>\n");
  // glibc's elements, with mallinfo2's figures.
  const size_t heap_end = xml.find("</heap>");
  ASSERT_NE(heap_end, std::string::npos);
  EXPECT_EQ(attr_of(xml, "<system type=\"current\"", "size"), static_cast<long long>(m.arena));
  EXPECT_EQ(attr_of(xml, "<total type=\"fast\"", "count"), static_cast<long long>(m.smblks));
  EXPECT_EQ(attr_of(xml, "<total type=\"fast\"", "size"), static_cast<long long>(m.fsmblks));
  EXPECT_EQ(attr_of(xml, "<total type=\"rest\"", "count"), static_cast<long long>(m.ordblks));
  EXPECT_EQ(attr_of(xml, "<total type=\"rest\"", "size"), static_cast<long long>(m.fordblks - m.fsmblks));
  EXPECT_EQ(attr_of(xml, "<total type=\"mmap\"", "count"), static_cast<long long>(m.hblks));
  EXPECT_EQ(attr_of(xml, "<total type=\"mmap\"", "size"), static_cast<long long>(m.hblkhd));
  EXPECT_EQ(attr_of(xml, "<system type=\"current\"", "size", heap_end), static_cast<long long>(m.arena + m.hblkhd));
  EXPECT_EQ(attr_of(xml, "<aspace type=\"total\"", "size"), static_cast<long long>(s.chunk.reserved));
  // The free 24-byte objects, in their class's line.
  const size_t cls = small::class_of(24);
  const std::string line = "<size from=\"" + std::to_string(small::class_size(cls - 1) + 1) + "\" to=\"" +
                           std::to_string(small::class_size(cls)) + "\"";
  EXPECT_EQ(attr_of(xml, line, "count"), static_cast<long long>(s.bins[cls].free_objects)) << xml;
  EXPECT_GT(s.bins[cls].free_objects, 0u);
  // ductile's own.
  EXPECT_NE(xml.find("<ductile version=\"" PACKAGE_VERSION "\">"), std::string::npos);
  EXPECT_EQ(attr_of(xml, "<stats ", "allocated"), static_cast<long long>(s.allocated));
  EXPECT_EQ(attr_of(xml, "<stats ", "mapped"), static_cast<long long>(s.mapped));
  EXPECT_EQ(attr_of(xml, "<layer name=\"huge\"", "allocated"), static_cast<long long>(s.huge.allocated));
  EXPECT_EQ(attr_of(xml, "<syscall name=\"mmap\"", "count"),
            static_cast<long long>(s.calls[static_cast<size_t>(os::Call::kMmap)]));
  EXPECT_NE(xml.find("<growth path=\"mremap\""), std::string::npos);
  free(h);
}

TEST(MallocInfo, NonZeroOptionsAreEinvalAsGlibc) {
  auto libc_malloc_info = from_libc<int (*)(int, FILE*)>("malloc_info");
  ASSERT_NE(libc_malloc_info, nullptr);
  ASSERT_NE(reinterpret_cast<void*>(libc_malloc_info), reinterpret_cast<void*>(&ductile_malloc_info));
  static Fixed out;
  out.len = 0;
  FILE* fp = open_fixed(&out);
  ASSERT_NE(fp, nullptr);
  for (int options : {1, -1, 2, INT_MAX}) {
    errno = 0;
    const int glibc = libc_malloc_info(options, fp);
    const int glibc_errno = errno;
    errno = 0;
    EXPECT_EQ(ductile_malloc_info(options, fp), glibc) << options;
    EXPECT_EQ(errno, glibc_errno) << options;
    EXPECT_EQ(glibc, EINVAL);
  }
  fclose(fp);
  EXPECT_EQ(out.len, 0u);  // nothing written
}

// A stream that allocates and asks ductile for figures while it is written
// to: no ductile lock may be held then.
ssize_t allocating_write(void* cookie, const char* buf, size_t n) {
  void* small = opaque(malloc(n));
  void* huge = opaque(malloc(3 * kMiB));
  std::memcpy(small, buf, n);
  static_cast<std::string*>(cookie)->append(static_cast<char*>(small), n);
  (void)mallinfo2();
  free(huge);
  free(small);
  return static_cast<ssize_t>(n);
}

TEST(MallocInfo, TheStreamMayAllocate) {
  std::string text;
  cookie_io_functions_t io = {nullptr, allocating_write, nullptr, nullptr};
  FILE* fp = fopencookie(&text, "w", io);
  ASSERT_NE(fp, nullptr);
  setvbuf(fp, nullptr, _IONBF, 0);  // every piece reaches the callback at once
  EXPECT_EQ(malloc_info(0, fp), 0);
  fclose(fp);
  EXPECT_TRUE(xml_check::valid(text)) << text;
  // And a memory stream, whose buffer is realloc'd as it grows.
  char* buf = nullptr;
  size_t len = 0;
  fp = open_memstream(&buf, &len);
  ASSERT_NE(fp, nullptr);
  EXPECT_EQ(malloc_info(0, fp), 0);
  fclose(fp);
  EXPECT_TRUE(xml_check::valid(std::string(buf, len)));
  EXPECT_GT(len, 1000u);
  free(buf);
}

TEST(XmlCheck, RejectsBrokenXml) {
  EXPECT_TRUE(xml_check::valid("<a/>"));
  EXPECT_TRUE(xml_check::valid("<?xml version=\"1.0\"?>\n<a x='1' y=\"&lt;&#65;&#x41;\">t &amp; u<b/><!-- c --></a>\n"));
  for (const char* bad : {"", "<a>", "<a></b>", "<a/><b/>", "<a x=1/>", "<a x=\"1\" x=\"2\"/>", "<a x=\"1\"y=\"2\"/>",
                          "<a x=\"<\"/>", "<a>&nbsp;</a>", "<a>&amp</a>", "<1a/>", "text<a/>", "<a><b></a></b>",
                          "<a/>trailing", "<a x=\"1/>", "<a><!-- x -- y --></a>", "<a>]]></a>"})
    EXPECT_FALSE(xml_check::valid(bad)) << bad;
}

}  // namespace
}  // namespace ductile
