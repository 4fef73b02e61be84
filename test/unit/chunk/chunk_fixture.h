

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "support/layers.h"



class ChunkTest : public test::ChunkLayerTest {
 protected:
  void SetUp() override { make(); }

  void make(size_t reservation = 64 * kMiB) { make_chunks(reservation); }

    EXPECT_NE(a.extent, nullptr);
    return a.extent;
  }
  size_t syscalls() { return os_->counters().total(); }
  // An active extent's last page maps to it, or to nothing where that entry
  // was never written (PageMap::set_active_boundaries); never to another.
    return x == nullptr || x == e;
  }
};

