#pragma once
// Values parked in reusable slots of one vector, named by a 32-bit index: a heap or queue can
// then order small (key, slot) records instead of moving the values themselves.
#include <cstdint>
#include <utility>
#include <vector>

namespace myriad {

template <class T>
class Slab {
 public:
  // Parks `v`; its slot stays valid until Take.
  uint32_t Put(T&& v) {
    if (!free_.empty()) {
      const uint32_t slot = free_.back();
      free_.pop_back();
      items_[slot] = std::move(v);
      return slot;
    }
    items_.push_back(std::move(v));
    return static_cast<uint32_t>(items_.size() - 1);
  }
  // Moves the value out and frees its slot (left holding a default T, so whatever the value
  // owned is released now).
  T Take(uint32_t slot) {
    T v = std::move(items_[slot]);
    items_[slot] = T();
    free_.push_back(slot);
    return v;
  }
  T& operator[](uint32_t slot) { return items_[slot]; }

 private:
  std::vector<T> items_;
  std::vector<uint32_t> free_;
};

}  // namespace myriad
