#include "core/huge_array.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace myriad {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

void* AllocateLarge(size_t bytes, bool zero, size_t* allocated) {
  void* p = nullptr;
  if (bytes < kHugePage) {
    *allocated = (bytes + 63) & ~size_t{63};
    p = std::aligned_alloc(64, *allocated);
  } else {
    *allocated = (bytes + kHugePage - 1) & ~(kHugePage - 1);
    p = std::aligned_alloc(kHugePage, *allocated);
#ifdef MADV_HUGEPAGE
    if (p != nullptr) madvise(p, *allocated, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
  }
  if (p == nullptr) throw std::bad_alloc();
  if (zero) std::memset(p, 0, *allocated);
  return p;
}

void FreeDeleter::operator()(void* p) const { std::free(p); }

}  // namespace myriad
