// The KV store's same-host shared-memory data path, next to BM_Memcpy1MiB
// (bench/kvstore_data_bench.cc), against the target (the data path at least 50% of
// memcpy bandwidth for 1 MiB objects):
//   BM_DataPathShmPut1MiB / BM_DataPathShmBatchGet/1: one DataClient that found the node's
//     Unix socket through the TCP path (as every DataClient does), one request in flight, a
//     DataServer (one io thread) and a ShmServer over one NodeStore in the same process. A put
//     is a reserve round trip, a memcpy into the node's segment (mapped from its memfd) and a
//     commit round trip; a get is a pin round trip, a memcpy out of the segment into the
//     client's reused string, and a release message. bytes_per_second is the payload rate.
//   BM_DataPathShmBatchGet/8: 8 objects of 1 MiB per GET request.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kvstore/data_client.h"
#include "kvstore/data_server.h"
#include "kvstore/shm_server.h"
#include "kvstore_data_path.h"

namespace myriad {
namespace {

using namespace kvstore;

struct ShmNode {
  ShmNode()
      : store(uint64_t{512} << 20, uint64_t{64} << 20, /*shareable=*/true),
        shm(&store, {.path = fmt::format("/tmp/myriad_shm_bench_{}.sock", getpid()), .token = 42}),
        server(&store, {.threads = 1}) {
    ok = shm.Start().ok();
    server.set_shm_socket(shm.path(), shm.token());
    ok = ok && server.Start().ok();
  }
  std::string address() const { return fmt::format("127.0.0.1:{}", server.port()); }
  std::string Check(DataClient& client) const {
    return ok && client.UsesSharedMemory() ? "" : "no shm path";
  }
  NodeStore store;
  ShmServer shm;
  DataServer server;
  bool ok = false;
};

void BM_DataPathShmPut1MiB(benchmark::State& state) { kvstore_bench::Put1MiB<ShmNode>(state); }
BENCHMARK(BM_DataPathShmPut1MiB)->UseRealTime();

void BM_DataPathShmBatchGet(benchmark::State& state) { kvstore_bench::BatchGet<ShmNode>(state); }
BENCHMARK(BM_DataPathShmBatchGet)->Arg(1)->Arg(8)->UseRealTime();

}  // namespace
}  // namespace myriad
