#pragma once
// Large tables probed at random (hash tables of millions of entries): from 2 MiB on they are
// 2 MiB-aligned and advised as transparent huge pages, so a probe costs one memory access
// instead of one plus a page walk (two-level under virtualisation). Only a hint: where huge
// pages are off it is an ordinary allocation.
#include <cstddef>
#include <memory>
#include <type_traits>

namespace myriad {

// `bytes` rounded up to `*allocated` (64-byte aligned; huge-page aligned and advised from
// 2 MiB on), zeroed when `zero`. Throws std::bad_alloc. Free with FreeDeleter (std::free).
void* AllocateLarge(size_t bytes, bool zero, size_t* allocated);

struct FreeDeleter {
  void operator()(void* p) const;
};

// A fixed-size array of trivially copyable elements in such an allocation.
template <typename T>
class HugeArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  HugeArray() = default;
  HugeArray(size_t n, const T& fill) : size_(n) {
    if (n == 0) return;
    size_t allocated = 0;
    data_.reset(static_cast<T*>(AllocateLarge(n * sizeof(T), false, &allocated)));
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
  std::unique_ptr<T[], FreeDeleter> data_;
  size_t size_ = 0;
};

}  // namespace myriad
