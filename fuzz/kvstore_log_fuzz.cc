// libFuzzer target for what a KV store standby reads from its leader: the replication frames
// (kvstore/repl_log.h) and the operation-log records a master applies (KvMaster::Apply), and
// the data path's frame header checks. Any bytes must be refused with a status, never crash.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kvstore/data_wire.h"
#include "kvstore_core/master.h"
#include "kvstore/repl_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)myriad::kvstore::DecodeFrames(bytes, 1);
  myriad::kvstore::KvMaster standby;
  (void)standby.Apply(bytes);
  (void)standby.CanonicalHash();
  if (size >= sizeof(myriad::kvstore::wire::Header)) {
    myriad::kvstore::wire::Header h;
    std::memcpy(&h, data, sizeof h);
    (void)myriad::kvstore::wire::ValidateRequest(h, uint64_t{1} << 30);
    (void)myriad::kvstore::wire::ValidateReply(h, h.op, h.request_id, uint64_t{1} << 30);
  }
  return 0;
}
