// libFuzzer target for vLLM's KV-event decoder: any bytes must decode or fail with a status;
// whatever decodes must survive a re-encode and decode to the same batch.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <variant>

#include "net/kv_events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto batch = myriad::net::DecodeKvEventBatch(std::span<const uint8_t>(data, size));
  if (!batch.ok()) return 0;
  batch->unknown_events = 0;  // not re-encoded
  // An extra key that is neither a string nor an integer is kept as its digest, and written
  // back as that integer.
  for (auto& event : batch->events) {
    auto* stored = std::get_if<myriad::BlockStored>(&event);
    if (stored == nullptr || !stored->extra_keys) continue;
    for (auto& keys : *stored->extra_keys) {
      if (!keys) continue;
      for (auto& k : *keys) {
        if (k.kind == myriad::ExtraKey::Kind::kOther) k.kind = myriad::ExtraKey::Kind::kInt;
      }
    }
  }
  for (auto encoding : {myriad::net::KvEventEncoding::kArray, myriad::net::KvEventEncoding::kMap}) {
    auto again = myriad::net::DecodeKvEventBatch(myriad::net::EncodeKvEventBatch(*batch, encoding));
    if (!again.ok() || !(*again == *batch)) std::abort();
  }
  return 0;
}
