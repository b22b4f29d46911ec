#include "policy/store_load.h"

#include <algorithm>

namespace myriad::policy {

StoreLoad DecideStoreLoad(const PrefillCost& cost, const StorePath& path, const StoreLoadQuery& q) {
  const int64_t bt = std::max<int64_t>(q.block_tokens, 1);
  const int64_t input = std::max<int64_t>(q.input_tokens, 0);
  const int64_t hbm = std::clamp<int64_t>(q.hbm_blocks * bt, 0, input);
  const int64_t run = std::clamp<int64_t>(q.store_blocks, 0, (input - hbm) / bt);
  const int64_t reach = hbm + run * bt;
  const TierPrice p = PriceTierBytes(cost, 0, input, hbm, reach, static_cast<double>(run) * q.block_bytes, path);
  StoreLoad out;
  out.load_blocks = p.store_tokens > 0 ? run : 0;
  out.recompute_tokens = input - hbm - out.load_blocks * bt;
  out.seconds = p.ttft_s;
  return out;
}

}  // namespace myriad::policy
