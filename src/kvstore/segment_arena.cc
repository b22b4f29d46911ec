#include "kvstore/segment_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

namespace myriad::kvstore {

SegmentArena::SegmentArena(uint64_t bytes, bool shareable) : capacity_(bytes / kAlign * kAlign) {
  // Shareable: a memfd, so that local clients can map the segment (kvstore/shm_server.h);
  // anonymous memory otherwise, or where memfd_create is refused (seccomp, old kernels): then
  // only the TCP path reaches it. A memfd holds a descriptor for the arena's life, so only a
  // store that serves the shared-memory path takes them.
  fd_ = shareable ? memfd_create("myriad-kv-segment", MFD_CLOEXEC) : -1;
  if (fd_ >= 0 && ftruncate(fd_, static_cast<off_t>(capacity_)) != 0) {
    close(fd_);
    fd_ = -1;
  }
  void* p = fd_ >= 0 ? mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0)
                     : MAP_FAILED;
  if (p == MAP_FAILED && fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  if (p == MAP_FAILED) {
    p = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  if (p == MAP_FAILED) throw std::bad_alloc();
  base_ = static_cast<std::byte*>(p);
  // The pages are touched as objects are written; only the first tag now.
  Tag* t = TagAt(0);
  *t = Tag{capacity_, 0, kNone, kNone, 0};
  PushFree(0);
}

SegmentArena::~SegmentArena() {
  munmap(base_, capacity_);
  if (fd_ >= 0) close(fd_);
}

void SegmentArena::PushFree(uint64_t block) {
  Tag* t = TagAt(block);
  t->used = 0;
  t->prev_free = kNone;
  t->next_free = free_head_;
  if (free_head_ != kNone) TagAt(free_head_)->prev_free = block;
  free_head_ = block;
  ++free_blocks_;
}

void SegmentArena::Unlink(uint64_t block) {
  Tag* t = TagAt(block);
  if (t->prev_free != kNone) {
    TagAt(t->prev_free)->next_free = t->next_free;
  } else {
    free_head_ = t->next_free;
  }
  if (t->next_free != kNone) TagAt(t->next_free)->prev_free = t->prev_free;
  --free_blocks_;
}

void SegmentArena::FixNext(uint64_t block) {
  const uint64_t next = block + TagAt(block)->size;
  if (next < capacity_) TagAt(next)->prev_size = TagAt(block)->size;
}

std::optional<uint64_t> SegmentArena::Allocate(uint64_t size) {
  if (size > max_payload()) return std::nullopt;
  const uint64_t need = kTagBytes + (size + kAlign - 1) / kAlign * kAlign;
  for (uint64_t b = free_head_; b != kNone; b = TagAt(b)->next_free) {
    Tag* t = TagAt(b);
    if (t->size < need) continue;
    Unlink(b);
    if (t->size - need >= 2 * kTagBytes) {
      // Split: the remainder stays free.
      const uint64_t rest = b + need;
      *TagAt(rest) = Tag{t->size - need, need, kNone, kNone, 0};
      t->size = need;
      FixNext(rest);
      PushFree(rest);
    }
    t->used = 1;
    used_ += t->size;
    return b + kTagBytes;
  }
  return std::nullopt;
}

void SegmentArena::Free(uint64_t offset) {
  uint64_t b = offset - kTagBytes;
  Tag* t = TagAt(b);
  used_ -= t->size;
  const uint64_t next = b + t->size;
  if (next < capacity_ && TagAt(next)->used == 0) {
    Unlink(next);
    t->size += TagAt(next)->size;
  }
  if (t->prev_size != 0) {
    const uint64_t prev = b - t->prev_size;
    if (TagAt(prev)->used == 0) {
      Unlink(prev);
      TagAt(prev)->size += t->size;
      b = prev;
    }
  }
  FixNext(b);
  PushFree(b);
}

}  // namespace myriad::kvstore
