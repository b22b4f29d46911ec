#include "core/steady_now.h"
#include "kvstore/repl_log.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace myriad::kvstore {

namespace {

constexpr char kMagic[4] = {'M', 'Y', 'R', 'L'};

void Put64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void Put32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t Get(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(in[at + i])} << (8 * i);
  return v;
}

uint64_t Checksum(uint64_t term, uint64_t seq, uint32_t length, std::string_view records) {
  XXH64_state_t state;
  XXH64_reset(&state, 0x4d59524c);
  char head[20];
  for (int i = 0; i < 8; ++i) head[i] = static_cast<char>(term >> (8 * i));
  for (int i = 0; i < 8; ++i) head[8 + i] = static_cast<char>(seq >> (8 * i));
  for (int i = 0; i < 4; ++i) head[16 + i] = static_cast<char>(length >> (8 * i));
  XXH64_update(&state, head, sizeof(head));
  XXH64_update(&state, records.data(), records.size());
  return XXH64_digest(&state);
}

}  // namespace

void AppendFrame(const LogBatch& batch, std::string* out) {
  const auto length = static_cast<uint32_t>(batch.records.size());
  out->append(kMagic, 4);
  Put64(out, batch.term);
  Put64(out, batch.seq);
  Put32(out, length);
  Put64(out, Checksum(batch.term, batch.seq, length, batch.records));
  out->append(batch.records);
}

absl::StatusOr<std::vector<LogBatch>> DecodeFrames(std::string_view body, uint64_t expect_seq) {
  std::vector<LogBatch> out;
  size_t at = 0;
  while (at < body.size()) {
    if (body.size() - at < kFrameHeaderBytes) {
      return absl::DataLossError(fmt::format(
          "log frame at byte {}: truncated header ({} of {} bytes)", at, body.size() - at,
          kFrameHeaderBytes));
    }
    if (std::memcmp(body.data() + at, kMagic, 4) != 0) {
      return absl::DataLossError(fmt::format("log frame at byte {}: bad magic", at));
    }
    LogBatch b;
    b.term = Get(body, at + 4, 8);
    b.seq = Get(body, at + 12, 8);
    const auto length = static_cast<uint32_t>(Get(body, at + 20, 4));
    const uint64_t sum = Get(body, at + 24, 8);
    if (body.size() - at - kFrameHeaderBytes < length) {
      return absl::DataLossError(fmt::format(
          "log frame at byte {}: batch {} truncated ({} of {} record bytes)", at, b.seq,
          body.size() - at - kFrameHeaderBytes, length));
    }
    const std::string_view records = body.substr(at + kFrameHeaderBytes, length);
    if (Checksum(b.term, b.seq, length, records) != sum) {
      return absl::DataLossError(
          fmt::format("log frame at byte {}: batch {} fails its checksum", at, b.seq));
    }
    const uint64_t want = out.empty() ? expect_seq : out.back().seq + 1;
    if (want != 0 && b.seq != want) {
      return absl::DataLossError(fmt::format(
          "log frame at byte {}: batch {} where batch {} was expected", at, b.seq, want));
    }
    b.records = std::string(records);
    out.push_back(std::move(b));
    at += kFrameHeaderBytes + length;
  }
  return out;
}

uint64_t ReplicationLog::Append(uint64_t term, std::string records) {
  std::lock_guard lock(mu_);
  const uint64_t seq = first_seq_ + batches_.size();
  bytes_ += records.size() + kFrameHeaderBytes;
  batches_.push_back(LogBatch{.term = term, .seq = seq, .records = std::move(records)});
  last_term_ = term;
  TrimLocked();
  appended_.notify_all();
  return seq;
}

void ReplicationLog::AppendApplied(LogBatch batch) {
  std::lock_guard lock(mu_);
  if (batch.seq != first_seq_ + batches_.size()) return;  // the caller checked; keep the log dense
  bytes_ += batch.records.size() + kFrameHeaderBytes;
  last_term_ = batch.term;
  batches_.push_back(std::move(batch));
  TrimLocked();
  appended_.notify_all();
}

void ReplicationLog::Reset(uint64_t next_seq, uint64_t last_term) {
  std::lock_guard lock(mu_);
  batches_.clear();
  bytes_ = 0;
  first_seq_ = next_seq;
  last_term_ = last_term;
  base_term_ = last_term;
}

void ReplicationLog::TrimLocked() {
  while (!batches_.empty() &&
         (bytes_ > options_.max_bytes || batches_.size() > options_.max_batches)) {
    bytes_ -= batches_.front().records.size() + kFrameHeaderBytes;
    base_term_ = batches_.front().term;
    batches_.pop_front();
    ++first_seq_;
  }
}

uint64_t ReplicationLog::next_seq() const {
  std::lock_guard lock(mu_);
  return first_seq_ + batches_.size();
}
uint64_t ReplicationLog::last_term() const {
  std::lock_guard lock(mu_);
  return last_term_;
}
uint64_t ReplicationLog::first_seq() const {
  std::lock_guard lock(mu_);
  return first_seq_;
}
uint64_t ReplicationLog::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

ReplicationLog::ReadResult ReplicationLog::Read(uint64_t from, uint64_t prev_term,
                                                size_t max_bytes, Nanos wait,
                                                const std::string* standby,
                                                std::string* frames) {
  std::unique_lock lock(mu_);
  const uint64_t next = first_seq_ + batches_.size();
  // Ahead of this log, or behind what it still holds (trimmed).
  if (from == 0 || from > next || from < first_seq_) return ReadResult::kNeedSnapshot;
  // The batch before `from` must be ours, with the standby's term.
  if (from > 1) {
    const uint64_t term =
        from - 1 == first_seq_ - 1 ? base_term_ : batches_[from - 1 - first_seq_].term;
    if (term != prev_term) return ReadResult::kNeedSnapshot;
  }
  if (standby != nullptr) {
    acks_[*standby] = from;
    acked_.notify_all();
    if (on_ack_) {
      // Outside the lock: the callback reads the acks (writes waiting on them are answered now,
      // not after this pull's long poll).
      lock.unlock();
      on_ack_();
      lock.lock();
      if (from < first_seq_) return ReadResult::kNeedSnapshot;  // trimmed meanwhile
    }
  }
  if (from == first_seq_ + batches_.size() && wait > 0) {
    appended_.wait_for(lock, std::chrono::nanoseconds(wait),
                       [&] { return first_seq_ + batches_.size() > from || from < first_seq_; });
    if (from < first_seq_) return ReadResult::kNeedSnapshot;
  }
  size_t bytes = 0;
  for (uint64_t s = from; s < first_seq_ + batches_.size(); ++s) {
    const LogBatch& b = batches_[s - first_seq_];
    if (bytes > 0 && bytes + b.records.size() > max_bytes) break;
    AppendFrame(b, frames);
    bytes += b.records.size() + kFrameHeaderBytes;
  }
  return ReadResult::kOk;
}

void ReplicationLog::Ack(const std::string& standby, uint64_t next) {
  {
    std::lock_guard lock(mu_);
    uint64_t& at = acks_[standby];
    at = next;
  }
  acked_.notify_all();
  if (on_ack_) on_ack_();
}

int ReplicationLog::AckedLocked(uint64_t seq) const {
  int n = 0;
  for (const auto& [name, next] : acks_) n += next > seq ? 1 : 0;
  return n;
}

int ReplicationLog::Acked(uint64_t seq) const {
  std::lock_guard lock(mu_);
  return AckedLocked(seq);
}

bool ReplicationLog::WaitAcks(uint64_t seq, int needed, Nanos deadline_steady) {
  if (needed <= 0) return true;
  std::unique_lock lock(mu_);
  while (AckedLocked(seq) < needed) {
    const Nanos left = deadline_steady - SteadyNow();
    if (left <= 0) return false;
    acked_.wait_for(lock, std::chrono::nanoseconds(left));
  }
  return true;
}

void ReplicationLog::ClearAcks() {
  std::lock_guard lock(mu_);
  acks_.clear();
}

std::map<std::string, uint64_t> ReplicationLog::standbys() const {
  std::lock_guard lock(mu_);
  return acks_;
}

}  // namespace myriad::kvstore
