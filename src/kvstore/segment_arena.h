#pragma once
// SegmentArena: one preallocated memory segment of a storage node and a first-fit allocator with
// boundary tags inside it. Every block (used or free) starts with a 64-byte tag holding its size
// and its left neighbour's size, so Free coalesces with both neighbours in O(1); free blocks are
// on an intrusive doubly-linked list threaded through their tags. No heap allocation per object:
// the only bookkeeping lives in the segment. Payloads are 64-byte aligned. Not thread-safe.
// A shareable segment's memory is a memfd mapped MAP_SHARED (kvstore/shm_server.h hands the fd
// to clients on the same host, which map it too); other segments, and shareable ones where
// memfd_create is refused, are anonymous memory with fd() -1. Pages are committed as they are
// first written either way.
#include <cstddef>
#include <cstdint>
#include <optional>

namespace myriad::kvstore {

class SegmentArena {
 public:
  static constexpr uint64_t kAlign = 64;
  static constexpr uint64_t kTagBytes = 64;

  // `bytes` rounded down to kAlign; at least two blocks' worth.
  explicit SegmentArena(uint64_t bytes, bool shareable = false);
  ~SegmentArena();
  SegmentArena(const SegmentArena&) = delete;
  SegmentArena& operator=(const SegmentArena&) = delete;

  // The payload offset of a block with room for `size` bytes, or nullopt when no free block is
  // large enough (fragmentation or full).
  std::optional<uint64_t> Allocate(uint64_t size);
  // Frees the block whose payload starts at `offset` (from Allocate).
  void Free(uint64_t offset);

  std::byte* At(uint64_t offset) { return base_ + offset; }
  // The memfd holding the segment (owned by the arena), or -1.
  int fd() const { return fd_; }
  uint64_t capacity() const { return capacity_; }
  // Bytes in used blocks, tags included.
  uint64_t used() const { return used_; }
  uint64_t free_blocks() const { return free_blocks_; }
  // The largest payload Allocate could ever give in an empty segment.
  uint64_t max_payload() const { return capacity_ - kTagBytes; }

 private:
  struct Tag {
    uint64_t size;       // block bytes, tag included; a multiple of kAlign
    uint64_t prev_size;  // the left neighbour's size; 0 for the first block
    uint64_t next_free;  // offsets of tags on the free list; kNone at the ends
    uint64_t prev_free;
    uint64_t used;
  };
  static constexpr uint64_t kNone = UINT64_MAX;

  Tag* TagAt(uint64_t block) { return reinterpret_cast<Tag*>(base_ + block); }
  void PushFree(uint64_t block);
  void Unlink(uint64_t block);
  // Tells the block right of `block` (if any) its new left-neighbour size.
  void FixNext(uint64_t block);

  std::byte* base_ = nullptr;  // mmap'd, page aligned
  int fd_ = -1;
  uint64_t capacity_;
  uint64_t free_head_ = kNone;
  uint64_t used_ = 0;
  uint64_t free_blocks_ = 0;
};

}  // namespace myriad::kvstore
