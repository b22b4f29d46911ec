#pragma once
// The leader's replication log: the operation-log records (kvstore_core/op_log.h) of each write,
// numbered and kept in memory for the standbys to pull, and the bookkeeping of what each
// standby has applied (semi-synchronous acknowledgement).
//
// A batch is the records one write (or one housekeeping round) produced. It carries the term of
// the leader that wrote it (the etcd create_revision of its leader key: unique and increasing
// per election) and a sequence number (1, 2, ...; consecutive across leaders, since a promoted
// standby continues its leader's numbering). On the wire a batch is a frame:
//
//   "MYRL" | term u64 | seq u64 | length u32 | xxh64(term, seq, length, records) u64 | records
//
// (integers little-endian, 32 header bytes), and a pull's answer is frames back to back.
// DecodeFrames refuses a bad magic, a truncated header or body, a checksum mismatch and a gap
// in the numbering, naming the byte offset and the batch.
//
// Consistency of a standby's log with the leader's (as Raft's log matching): a standby asks for
// `from` together with the term of its batch from-1. The leader serves only when it holds that
// batch with that term (or from == 1); otherwise, and when the batches after it were trimmed
// from memory, the standby must install a snapshot (KvMaster::SnapshotLog) first.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"

namespace myriad::kvstore {

struct LogBatch {
  uint64_t term = 0;
  uint64_t seq = 0;
  std::string records;
};

inline constexpr size_t kFrameHeaderBytes = 32;

void AppendFrame(const LogBatch& batch, std::string* out);
// Frames back to back; the first must be batch `expect_seq` (0: any) and each the next.
absl::StatusOr<std::vector<LogBatch>> DecodeFrames(std::string_view body, uint64_t expect_seq);

struct ReplicationLogOptions {
  // Batches beyond these are dropped from the front (standbys that still need them snapshot).
  size_t max_bytes = size_t{64} << 20;
  size_t max_batches = 1 << 20;
};

class ReplicationLog {
 public:
  explicit ReplicationLog(ReplicationLogOptions options = {}) : options_(options) {}

  // The leader: appends the records of one write as the next batch; returns its seq.
  uint64_t Append(uint64_t term, std::string records);
  // A standby: keeps a batch it applied (seq must be next_seq()), so that once promoted it can
  // serve the other standbys from where they are.
  void AppendApplied(LogBatch batch);
  // After a snapshot that reflects every batch before `next_seq`: forgets the batches.
  void Reset(uint64_t next_seq, uint64_t last_term);

  uint64_t next_seq() const;
  uint64_t last_term() const;
  uint64_t first_seq() const;  // the oldest batch held (next_seq when none)

  enum class ReadResult { kOk, kNeedSnapshot };
  // Frames of the batches from `from` on (up to about max_bytes, at least one batch) into
  // *frames; kNeedSnapshot when the standby's log does not match (see above) or the batches it
  // needs were trimmed. Waits up to `wait` for a batch when there is none yet. With `standby`,
  // a matching read first records that standby's position (as Ack).
  ReadResult Read(uint64_t from, uint64_t prev_term, size_t max_bytes, Nanos wait,
                  const std::string* standby, std::string* frames);

  // A standby reported that it applied every batch before `next`.
  void Ack(const std::string& standby, uint64_t next);
  // Waits until `needed` standbys have applied batch `seq`, or the deadline (steady clock
  // nanos) passes; false on timeout. needed <= 0 returns true at once.
  bool WaitAcks(uint64_t seq, int needed, Nanos deadline_steady);
  // Standbys that have applied batch `seq` now.
  int Acked(uint64_t seq) const;
  // Called (outside the log's lock) each time a standby's position is recorded. Set before use.
  void set_on_ack(std::function<void()> f) { on_ack_ = std::move(f); }
  // Forgets the standbys' positions (a new term: they must report to the new leader).
  void ClearAcks();
  // Standbys that have reported, with the next seq each needs.
  std::map<std::string, uint64_t> standbys() const;
  uint64_t bytes() const;

 private:
  void TrimLocked();
  int AckedLocked(uint64_t seq) const;

  ReplicationLogOptions options_;
  mutable std::mutex mu_;
  std::function<void()> on_ack_;
  std::condition_variable appended_;  // a batch was appended
  std::condition_variable acked_;     // a standby reported
  std::deque<LogBatch> batches_;
  uint64_t first_seq_ = 1;  // seq of batches_.front()
  uint64_t last_term_ = 0;
  uint64_t bytes_ = 0;
  // The term of batch first_seq_-1 (the last one trimmed or snapshotted), for Read's check.
  uint64_t base_term_ = 0;
  std::map<std::string, uint64_t> acks_;
};

}  // namespace myriad::kvstore
