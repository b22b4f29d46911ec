#pragma once
// The master's operation log: one compact binary record per metadata mutation, in the order
// the leader applied them. It is an effect log, not a command log: records carry decisions
// (the nodes a put was placed on, which object was evicted), so a standby applies them without
// re-deciding and without the leader's soft state (leases, heartbeats, CLOCK bits, the random
// generator), and ends with identical metadata.
//
// Record: type (1 byte), then fields as LEB128 varints (zigzag for signed), block keys as 8
// little-endian bytes (they are uniform hashes: a varint would grow them), strings as a varint
// length and bytes. Framing is the caller's (etcd, a replication stream): a record's length is
// implied by its type and fields.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/block_hash.h"

namespace myriad::kvstore {

enum class LogType : uint8_t {
  kAddNode = 1,         // node, domain, capacity, joined_at
  kNodeDead = 2,        // node: its replicas are dropped, as the leader dropped them
  kCreateNamespace = 3, // ns, name
  kDropNamespace = 4,   // ns: invisible from now on
  kReclaimNamespace = 5,// ns: its bytes go back to the nodes
  kPutStart = 6,        // ns, blocks, keys, size, target, pinned, deadline, replicas
  kPutEnd = 7,          // ns, object
  kRemove = 8,          // ns, object, reason
  kPin = 9,             // ns, object, pinned
  kRepairStart = 10,    // ns, object, destination
  kRepairEnd = 11,      // ns, object, destination, ok
  // Only in snapshots (KvMaster::SnapshotLog), which rebuild a state rather than replay history:
  kSnapshotCounters = 12,  // objects lost, objects evicted
  kSnapshotRepairing = 13, // ns, object, mask of replicas whose repair copy is in flight
  // kPutStart's fields, then the object's checksum (8 bytes). A put without a checksum is
  // still logged as kPutStart, so logs and snapshots written before checksums replay as-is.
  kPutStartChecked = 14,
};

// Why an object went away; kept so a standby's counters match the leader's.
enum class RemoveReason : uint8_t { kRemoved = 0, kRevoked = 1, kEvicted = 2, kExpired = 3 };

class LogWriter {
 public:
  void Type(LogType t) { out_.push_back(static_cast<char>(t)); }
  void U64(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void I64(int64_t v) { U64((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void Key(BlockKey k) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(k >> (8 * i)));
  }
  void Str(std::string_view s) {
    U64(s.size());
    out_.append(s);
  }

  std::string& buffer() { return out_; }
  size_t records() const { return records_; }
  void EndRecord() { ++records_; }
  // Hands the bytes written so far to the caller and starts afresh.
  std::string Take() {
    records_ = 0;
    return std::exchange(out_, std::string());
  }

 private:
  std::string out_;
  size_t records_ = 0;
};

// Reads fields; any read past the end (a truncated or corrupt log) sets failed().
class LogReader {
 public:
  explicit LogReader(std::string_view in) : in_(in) {}
  bool done() const { return pos_ >= in_.size(); }
  bool failed() const { return failed_; }
  size_t position() const { return pos_; }

  uint8_t Byte() {
    if (pos_ >= in_.size()) return Fail();
    return static_cast<uint8_t>(in_[pos_++]);
  }
  uint64_t U64() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= in_.size()) return Fail();
      const uint8_t b = static_cast<uint8_t>(in_[pos_++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
    return Fail();
  }
  int64_t I64() {
    const uint64_t z = U64();
    return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  BlockKey Key() {
    if (in_.size() - pos_ < 8 || pos_ > in_.size()) return Fail();
    BlockKey k = 0;
    for (int i = 0; i < 8; ++i) k |= BlockKey{static_cast<uint8_t>(in_[pos_ + i])} << (8 * i);
    pos_ += 8;
    return k;
  }
  std::string_view Str() {
    const uint64_t n = U64();
    if (failed_ || n > in_.size() - pos_) {
      Fail();
      return {};
    }
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  uint8_t Fail() {
    failed_ = true;
    pos_ = in_.size();
    return 0;
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace myriad::kvstore
