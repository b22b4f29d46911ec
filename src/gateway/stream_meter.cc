#include "gateway/stream_meter.h"

#include <algorithm>

namespace myriad::gateway {

namespace {

// Enough of a whole answer's end to hold a usage key and its number across two reads.
constexpr size_t kTailBytes = 64;

// Where the SSE event starting at `from` ends (after its blank line), or npos.
size_t EventEnd(std::string_view buf, size_t from) {
  for (size_t i = buf.find('\n', from); i != std::string_view::npos; i = buf.find('\n', i + 1)) {
    if (i + 1 < buf.size() && buf[i + 1] == '\n') return i + 2;
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

// True when `key` (a quoted name and its colon) occurs with a non-empty string value.
bool HasText(std::string_view event, std::string_view key) {
  for (size_t at = event.find(key); at != std::string_view::npos; at = event.find(key, at + 1)) {
    size_t v = at + key.size();
    while (v < event.size() && event[v] == ' ') ++v;
    if (v + 1 < event.size() && event[v] == '"' && event[v + 1] != '"') return true;
  }
  return false;
}

// The number after the last unescaped occurrence of `key` (e.g. "completion_tokens":); -1.
int64_t LastNumber(std::string_view text, std::string_view key) {
  int64_t out = -1;
  for (size_t at = text.find(key); at != std::string_view::npos; at = text.find(key, at + 1)) {
    if (at > 0 && text[at - 1] == '\\') continue;  // inside a string: generated text
    size_t v = at + key.size();
    while (v < text.size() && text[v] == ' ') ++v;
    int64_t n = 0;
    size_t digits = 0;
    while (v < text.size() && text[v] >= '0' && text[v] <= '9' && digits < 18) {
      n = n * 10 + (text[v] - '0');
      ++v;
      ++digits;
    }
    if (digits > 0) out = n;
  }
  return out;
}

}  // namespace

void StreamMeter::OnData(std::string_view data, Clock::time_point now) {
  if (!sse_) {
    // A whole JSON answer: only its usage is of interest, near its end.
    const size_t head = std::min(data.size(), kTailBytes);
    if (!tail_.empty()) ScanUsage(tail_ + std::string(data.substr(0, head)));
    ScanUsage(data);
    tail_.append(data.substr(data.size() - head));
    if (tail_.size() > kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
    return;
  }
  if (skipping_) {
    const size_t end = EventEnd(data, 0);
    if (end == std::string_view::npos) return;
    skipping_ = false;
    data.remove_prefix(end);
  }
  std::string joined;
  std::string_view buf = data;
  if (!pending_.empty()) {
    joined = std::move(pending_);
    joined.append(data);
    pending_.clear();
    buf = joined;
  }
  size_t pos = 0;
  for (size_t end = EventEnd(buf, pos); end != std::string_view::npos; end = EventEnd(buf, pos)) {
    OnEvent(buf.substr(pos, end - pos), now);
    pos = end;
  }
  if (buf.size() - pos > kMaxEventBytes) {
    skipping_ = true;
  } else {
    pending_.assign(buf.substr(pos));
  }
}

void StreamMeter::OnEvent(std::string_view event, Clock::time_point now) {
  if (event.find("\"usage\"") != std::string_view::npos) ScanUsage(event);
  // Before the first token no generated text can hold these keys; after it only the end
  // matters (finish_reason's value is a string only on a choice's last event).
  if (event.starts_with("data: [DONE]") || event.starts_with("data:[DONE]") || HasText(event, "\"finish_reason\":")) {
    ended_ = true;
  }
  // llama.cpp has sent its failures both as an `error:` line and as a data event with an
  // "error" object.
  if (token_events_ == 0 && (event.starts_with("error:") || event.find("\"error\":") != std::string_view::npos)) {
    error_before_token_ = true;
  }
  if (!HasText(event, "\"text\":") && !HasText(event, "\"content\":") &&
      !HasText(event, "\"reasoning_content\":")) {
    return;
  }
  if (token_events_++ == 0) {
    first_token_ = now;
  } else {
    const double gap = std::chrono::duration<double>(now - last_token_).count();
    const size_t bucket = static_cast<size_t>(std::lower_bound(kGapBounds.begin(), kGapBounds.end(), gap) -
                                              kGapBounds.begin());
    gaps_[bucket]++;
    gap_sum_s_ += gap;
  }
  last_token_ = now;
}

void StreamMeter::ScanUsage(std::string_view text) {
  if (const int64_t p = LastNumber(text, "\"prompt_tokens\":"); p >= 0) usage_prompt_ = p;
  if (const int64_t c = LastNumber(text, "\"completion_tokens\":"); c >= 0) usage_completion_ = c;
}

int64_t StreamMeter::output_tokens() const {
  if (usage_completion_ >= 0) return usage_completion_;
  return sse_ ? token_events_ : -1;
}

}  // namespace myriad::gateway
