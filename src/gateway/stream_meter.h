#pragma once
// What the gateway can measure of an OpenAI-style answer from the upstream's bytes as they
// arrive, without parsing them as JSON on the data path: when the first generated token came (an
// SSE event whose text, content or reasoning_content is not empty: vLLM's first chat event
// only names the role, llama.cpp sends its header and keep-alive comments before it prefills),
// the gaps between token events, the usage counts when the engine sends them (always for a
// whole JSON answer; for a stream, with stream_options.include_usage), whether the stream
// reached its end ([DONE] or a finish_reason), and an error event sent before any token. The
// first token is the exchange's one first-token event: the client's answer is held until it.
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace myriad::gateway {

class StreamMeter {
 public:
  using Clock = std::chrono::steady_clock;

  // Upper bounds (seconds) of the inter-token gap buckets the meter counts in: from 1 ms (a
  // fast decode step) to 5 s (a stalled stream); the last bucket is over 5 s.
  static constexpr std::array<double, 16> kGapBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
                                                        0.15,  0.2,    0.3,   0.5,  0.75,  1.0,  2.5,   5.0};
  // An SSE event longer than this is not looked into (its tokens go uncounted): the meter's
  // memory stays bounded whatever the engine sends.
  static constexpr size_t kMaxEventBytes = 64 * 1024;

  // `sse`: the answer is an event stream (the request asked for stream: true).
  explicit StreamMeter(bool sse = false) : sse_(sse) {}
  void set_sse(bool sse) { sse_ = sse; }

  // The next bytes sent to the client, received at `now`.
  void OnData(std::string_view data, Clock::time_point now);

  bool has_first_token() const { return token_events_ > 0; }
  // The stream's end was seen: a `data: [DONE]` event or a choice's finish_reason.
  bool ended() const { return ended_; }
  // An event carrying an "error" object came before any token: the engine failed the request
  // after its 200 header (what llama.cpp does when it fails during prefill).
  bool error_before_token() const { return error_before_token_; }
  Clock::time_point first_token() const { return first_token_; }
  // Events that carried generated text (a stream only).
  int64_t token_events() const { return token_events_; }
  // usage.prompt_tokens / usage.completion_tokens as the engine reported them; -1: not seen.
  int64_t usage_prompt_tokens() const { return usage_prompt_; }
  int64_t usage_completion_tokens() const { return usage_completion_; }
  // Generated tokens: the engine's count when it gave one, else the token events of a stream;
  // -1 when neither is known (a whole answer without usage).
  int64_t output_tokens() const;

  // Gaps between consecutive token events, counted per kGapBounds bucket (not cumulative).
  const std::array<uint64_t, kGapBounds.size() + 1>& gaps() const { return gaps_; }
  double gap_sum_s() const { return gap_sum_s_; }

 private:
  void OnEvent(std::string_view event, Clock::time_point now);
  void ScanUsage(std::string_view text);

  bool sse_;
  std::string pending_;  // an SSE event cut by a read, awaiting its end
  bool skipping_ = false;  // the pending event grew past kMaxEventBytes: dropped to its end
  std::string tail_;     // a whole answer's last bytes: usage may span two reads
  int64_t token_events_ = 0;
  bool ended_ = false, error_before_token_ = false;
  int64_t usage_prompt_ = -1, usage_completion_ = -1;
  Clock::time_point first_token_, last_token_;
  std::array<uint64_t, kGapBounds.size() + 1> gaps_{};
  double gap_sum_s_ = 0;
};

}  // namespace myriad::gateway
