#pragma once
// A fixed-size array of trivially copyable elements, asking the kernel for 2 MiB pages when it
// spans at least one: the tokenizer's lookup tables (several MiB, probed at random) otherwise
// miss the TLB on most probes. Only a hint: where transparent huge pages are off it is an
// ordinary allocation.
#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace myriad::tokenizer {

template <typename T>
class HugeArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  HugeArray() = default;
  HugeArray(size_t n, const T& fill) : size_(n) {
    if (n == 0) return;
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t bytes = n * sizeof(T);
    const size_t align = bytes >= kHuge ? kHuge : alignof(std::max_align_t) > 64 ? alignof(std::max_align_t) : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    if (p == nullptr) throw std::bad_alloc();
    if (bytes >= kHuge) madvise(p, rounded, MADV_HUGEPAGE);
    data_.reset(static_cast<T*>(p));
    for (size_t i = 0; i < n; ++i) data_[i] = fill;
  }
  HugeArray(HugeArray&&) noexcept = default;
  HugeArray& operator=(HugeArray&&) noexcept = default;

  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T[], Free> data_;
  size_t size_ = 0;
};

}  // namespace myriad::tokenizer
