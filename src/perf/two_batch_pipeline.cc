#include "perf/two_batch_pipeline.h"

#include <algorithm>
#include <cstddef>
#include <span>

namespace myriad::perf {
namespace {

enum class Op { kPrepare, kCore, kShared, kExperts, kIssueDispatch, kWaitDispatch, kIssueCombine, kWaitCombine, kYield };

// One MoE layer's operations, as SGLang's operations_strategy.py lists them for DeepSeek.
constexpr Op kDecode[] = {Op::kPrepare,       Op::kYield,        Op::kCore,         Op::kYield,
                          Op::kIssueDispatch, Op::kShared,       Op::kYield,        Op::kWaitDispatch,
                          Op::kExperts,       Op::kIssueCombine, Op::kYield,        Op::kWaitCombine,
                          Op::kYield};
constexpr Op kPrefill[] = {Op::kPrepare, Op::kCore,         Op::kIssueDispatch, Op::kYield,  Op::kWaitDispatch,
                           Op::kExperts, Op::kIssueCombine, Op::kYield,         Op::kShared, Op::kWaitCombine};

struct Streams {
  double compute = 0;       // when the compute stream is next free
  double network_free = 0;  // when the NIC has sent what was issued before
};

// One micro-batch walking the concatenated layers, a stage per Next().
class Executor {
 public:
  Executor(std::span<const MicroBatchLayer> layers, std::span<const Op> pattern, Streams& s)
      : layers_(layers), pattern_(pattern), s_(s) {}

  void Next() {
    while (layer_ < layers_.size()) {
      const MicroBatchLayer& l = layers_[layer_];
      const Op op = pattern_[index_];
      if (++index_ == pattern_.size()) {
        index_ = 0;
        ++layer_;
      }
      switch (op) {
        case Op::kYield: return;
        case Op::kPrepare: s_.compute += l.attention_prepare; break;
        case Op::kCore: s_.compute += l.attention_core; break;
        case Op::kShared: s_.compute += l.shared_experts; break;
        case Op::kExperts: s_.compute += l.experts; break;
        case Op::kIssueDispatch: dispatch_done_ = Send(l.dispatch); break;
        case Op::kIssueCombine: combine_done_ = Send(l.combine); break;
        case Op::kWaitDispatch: s_.compute = std::max(s_.compute, dispatch_done_); break;
        case Op::kWaitCombine: s_.compute = std::max(s_.compute, combine_done_); break;
      }
    }
  }

 private:
  double Send(double seconds) {
    s_.network_free = std::max(s_.network_free, s_.compute) + seconds;
    return s_.network_free;
  }

  std::span<const MicroBatchLayer> layers_;
  std::span<const Op> pattern_;
  Streams& s_;
  size_t layer_ = 0, index_ = 0;
  double dispatch_done_ = 0, combine_done_ = 0;
};

}  // namespace

double TwoBatchPipelineSeconds(std::span<const MicroBatchLayer> layers, OverlapSchedule schedule) {
  if (layers.empty()) return 0;
  const std::span<const Op> pattern = schedule == OverlapSchedule::kDecode ? std::span<const Op>(kDecode)
                                                                           : std::span<const Op>(kPrefill);
  const size_t delta = schedule == OverlapSchedule::kDecode ? 2 : 0;
  const size_t stages = layers.size() * static_cast<size_t>(std::count(pattern.begin(), pattern.end(), Op::kYield)) + 1;
  Streams s;
  Executor a(layers, pattern, s), b(layers, pattern, s);
  for (size_t i = 0; i < delta; ++i) a.Next();
  for (size_t i = delta; i < stages; ++i) {
    a.Next();
    b.Next();
  }
  for (size_t i = 0; i < delta; ++i) b.Next();
  return s.compute;
}

}  // namespace myriad::perf
