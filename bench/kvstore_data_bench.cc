// Benchmarks of the KV store's data path and its node-loss repair, on loopback:
//   BM_Memcpy1MiB: memcpy of 1 MiB between two warm buffers, the yardstick of the issue's
//     target (the data path at least 50% of memcpy bandwidth for 1 MiB objects);
//     BM_Memcpy1MiBCold: 1 MiB copies out of cache (memory bandwidth).
//   BM_DataPathPut1MiB / BM_DataPathBatchGet/1: one DataClient, one request in flight, a
//     DataServer on one io thread in the same process: 1 MiB written into the node's segment
//     straight from the socket, or gathered from the segment to the socket and scattered into
//     the client's reused string. bytes_per_second is the payload rate.
//   BM_DataPathBatchGet/8: 8 objects of 1 MiB per GET request.
//   BM_DataPathVsLoopback: the yardstick and the data path in one run, interleaved so
//     the machine's load moves them alike: rounds of 64 MiB each through (a) a raw loopback
//     TCP stream of 1 MiB writes into a reader that acknowledges the 64 MiB with one byte, (b)
//     64 PUTs of 1 MiB one at a time, (c) PutMany of 64 x 1 MiB (pipelined on one connection),
//     (d) 64 GETs of 1 MiB one at a time, (e) 8 GETs of 8 x 1 MiB. Counters: GB/s (10^9) of
//     each and each data-path figure's ratio to the stream's.
//   BM_NodeLossRepair/nodes/objects/cap_MBps: a master (death after 1 s), `nodes` storage nodes
//     in distinct fault domains, `objects` objects of 256 KiB at replica target 2, one repair
//     agent (4 workers); the node holding the most objects is stopped. Counters: detect_s (stop
//     to the master declaring it dead), repair_s (declared dead to every object back at 2
//     complete replicas), repair_MBps (bytes re-replicated / repair_s), lost_objects.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/rng.h"
#include "kvstore/data_client.h"
#include "kvstore/data_server.h"
#include "kvstore/master_server.h"
#include "kvstore/repair_agent.h"
#include "kvstore/storage_node.h"
#include "kvstore/store_client.h"
#include "kvstore_data_path.h"

namespace myriad {
namespace {

using namespace kvstore;
using kvstore_bench::kMiB;

void BM_Memcpy1MiB(benchmark::State& state) {
  std::vector<char> a(kMiB, 'a'), b(kMiB, 'b');
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), kMiB);
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kMiB));
}
BENCHMARK(BM_Memcpy1MiB);

// The same copies cycling through 1 GiB of source and 1 GiB of destination, so neither side is
// in cache: memory bandwidth, which is what a node's segments and a reader's buffers see.
void BM_Memcpy1MiBCold(benchmark::State& state) {
  constexpr size_t kSlots = 1024;
  std::vector<char> a(kSlots * kMiB, 'a'), b(kSlots * kMiB, 'b');
  size_t slot = 0;
  for (auto _ : state) {
    std::memcpy(b.data() + slot * kMiB, a.data() + ((slot * 7) % kSlots) * kMiB, kMiB);
    benchmark::ClobberMemory();
    slot = (slot + 1) % kSlots;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kMiB));
}
BENCHMARK(BM_Memcpy1MiBCold);

// The ceiling of any TCP data path on this machine: one loopback stream of 1 MiB writes into
// a reader thread, no protocol, 4 MiB socket buffers (as the data path sets them).
void BM_LoopbackTcpStream1MiB(benchmark::State& state) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    state.SkipWithError("no loopback socket");
    return;
  }
  const int buf = 4 << 20;
  std::thread reader([listener, buf] {
    const int s = accept(listener, nullptr, nullptr);
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    std::vector<char> in(kMiB);
    while (read(s, in.data(), in.size()) > 0) {
    }
    close(s);
  });
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(s, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) state.SkipWithError("connect failed");
  const std::vector<char> out(kMiB, 'x');
  for (auto _ : state) {
    size_t sent = 0;
    while (sent < kMiB) {
      const ssize_t n = write(s, out.data() + sent, kMiB - sent);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  }
  close(s);
  reader.join();
  close(listener);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kMiB));
}
BENCHMARK(BM_LoopbackTcpStream1MiB)->UseRealTime();

struct DataNode {
  DataNode() : store(uint64_t{512} << 20, uint64_t{64} << 20), server(&store, Options()) {
    (void)server.Start();
  }
  static DataServerOptions Options() {
    DataServerOptions o;
    o.threads = 1;
    return o;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server.port()); }
  std::string Check(DataClient&) const { return ""; }
  NodeStore store;
  DataServer server;
};

void BM_DataPathPut1MiB(benchmark::State& state) { kvstore_bench::Put1MiB<DataNode>(state); }
BENCHMARK(BM_DataPathPut1MiB)->UseRealTime();

void BM_DataPathBatchGet(benchmark::State& state) { kvstore_bench::BatchGet<DataNode>(state); }
BENCHMARK(BM_DataPathBatchGet)->Arg(1)->Arg(8)->UseRealTime();

// A loopback TCP stream that stays open: Send(n) writes n bytes in 1 MiB writes and returns
// once the reader has read them all (it answers one byte per n), so the time covers both ends.
class LoopbackStream {
 public:
  LoopbackStream() {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener, 1) != 0 || getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    const int buf = 4 << 20;
    writer_ = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(writer_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(writer_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    if (connect(writer_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
    const int reader = accept(listener, nullptr, nullptr);
    close(listener);
    setsockopt(reader, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(reader, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    ok_ = reader >= 0;
    reader_ = std::thread([reader] {
      std::vector<char> in(kMiB);
      uint64_t want = 0;
      // Each round: 8 bytes announcing its length, then that many bytes, answered by one byte.
      while (read(reader, &want, sizeof want) == sizeof want) {
        for (uint64_t got = 0; got < want;) {
          const ssize_t n = read(reader, in.data(), std::min<uint64_t>(in.size(), want - got));
          if (n <= 0) return;
          got += static_cast<uint64_t>(n);
        }
        const char ack = 1;
        if (write(reader, &ack, 1) != 1) return;
      }
      close(reader);
    });
  }
  ~LoopbackStream() {
    if (writer_ >= 0) close(writer_);
    if (reader_.joinable()) reader_.join();
  }
  bool ok() const { return ok_; }
  bool Send(uint64_t bytes) {
    static const std::vector<char> out(kMiB, 'x');
    if (write(writer_, &bytes, sizeof bytes) != sizeof bytes) return false;
    for (uint64_t sent = 0; sent < bytes;) {
      const ssize_t n = write(writer_, out.data(), std::min<uint64_t>(out.size(), bytes - sent));
      if (n <= 0) return false;
      sent += static_cast<uint64_t>(n);
    }
    char ack = 0;
    return read(writer_, &ack, 1) == 1;
  }

 private:
  int writer_ = -1;
  bool ok_ = false;
  std::thread reader_;
};

void BM_DataPathVsLoopback(benchmark::State& state) {
  constexpr size_t kObjects = 64, kBatch = 8;
  constexpr double kRoundBytes = static_cast<double>(kObjects * kMiB);
  LoopbackStream stream;
  DataNode node;
  DataClient client(node.address());
  if (!stream.ok()) return state.SkipWithError("no loopback stream");
  const std::string value(kMiB, 'v');
  std::vector<ObjectName> names(kObjects, ObjectName{1, 42});
  const std::vector<std::string_view> values(kObjects, value);
  std::vector<ObjectName> batch;
  for (size_t i = 0; i < kBatch; ++i) {
    batch.push_back({2, i});
    if (!client.Put(batch.back(), value).ok()) return state.SkipWithError("put failed");
  }
  // Each reading loop keeps its own strings, as a reader reusing its buffers would.
  std::vector<std::string> got, got_batch;
  std::vector<absl::StatusCode> codes;
  std::vector<absl::Status> statuses;
  enum { kStream, kPut, kPutMany, kGet, kGetBatch, kKinds };
  double seconds[kKinds] = {};
  auto timed = [&](int kind, auto&& run) {
    const auto t = std::chrono::steady_clock::now();
    const bool ok = run();
    seconds[kind] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    if (!ok) state.SkipWithError("a transfer failed");
  };
  for (auto _ : state) {
    timed(kStream, [&] { return stream.Send(kObjects * kMiB); });
    timed(kPut, [&] {
      bool ok = true;
      for (size_t i = 0; i < kObjects; ++i) ok = client.Put(names[i], value).ok() && ok;
      return ok;
    });
    timed(kPutMany, [&] {
      bool ok = client.PutMany(names, values, &statuses).ok();
      for (const absl::Status& st : statuses) ok = ok && st.ok();
      return ok;
    });
    timed(kGet, [&] {
      bool ok = true;
      for (size_t i = 0; i < kObjects; ++i) {
        ok = client.Get(std::span(&names[i], 1), &got, &codes).ok() && codes[0] == absl::StatusCode::kOk && ok;
      }
      return ok;
    });
    timed(kGetBatch, [&] {
      bool ok = true;
      for (size_t i = 0; i < kObjects / kBatch; ++i) ok = client.Get(batch, &got_batch, &codes).ok() && ok;
      return ok;
    });
  }
  const double rounds = static_cast<double>(state.iterations());
  auto rate = [&](int kind) { return seconds[kind] > 0 ? rounds * kRoundBytes / seconds[kind] / 1e9 : 0.0; };
  const double yardstick = rate(kStream);
  state.counters["loopback_GBps"] = yardstick;
  const char* names_of[kKinds] = {"", "put", "put_pipelined", "get", "get_batch8"};
  for (int kind = kPut; kind < kKinds; ++kind) {
    state.counters[std::string(names_of[kind]) + "_GBps"] = rate(kind);
    state.counters[std::string(names_of[kind]) + "_ratio"] = yardstick > 0 ? rate(kind) / yardstick : 0.0;
  }
}
BENCHMARK(BM_DataPathVsLoopback)->Iterations(8)->Unit(benchmark::kMillisecond);

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void BM_NodeLossRepair(benchmark::State& state) {
  const auto nodes = static_cast<NodeId>(state.range(0));
  const auto objects = static_cast<uint64_t>(state.range(1));
  const double cap = static_cast<double>(state.range(2)) * 1e6;
  const size_t size = 256 << 10;
  for (auto _ : state) {
    MasterServerOptions mo;
    mo.master.dead_after = 1 * kSecond;
    mo.master.ramp = 0;
    mo.master.repair_bytes_per_second = cap;
    mo.master.repair_burst_bytes = static_cast<uint64_t>(cap / 10);  // 100 ms worth
    mo.tick_interval = 50 * kMillisecond;
    MasterServer master(mo);
    if (!master.Start().ok()) return state.SkipWithError("master did not start");
    const std::string url = "http://127.0.0.1:" + std::to_string(master.port());
    std::vector<std::unique_ptr<StorageNode>> node(nodes + 1);
    for (NodeId n = 1; n <= nodes; ++n) {
      StorageNodeOptions o;
      o.master_url = url;
      o.id = n;
      o.fault_domain = "rack-" + std::to_string(n);
      o.capacity_bytes = (objects * size * 2 / nodes) * 2 + (64 << 20);
      o.segment_bytes = 64 << 20;
      o.heartbeat_interval = 200 * kMillisecond;
      o.data.threads = 1;
      node[n] = std::make_unique<StorageNode>(o);
      if (!node[n]->Start().ok()) return state.SkipWithError("node did not start");
    }
    while (true) {
      bool all = true;
      for (NodeId n = 1; n <= nodes; ++n) all = all && node[n]->registered();
      if (all) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto client = StoreClient::Connect(url);
    if (!client.ok() || !(*client)->master().CreateNamespace("bench").ok()) {
      return state.SkipWithError("no client");
    }
    std::vector<BlockKey> keys;
    const std::string value(size, 'r');
    for (uint64_t i = 0; i < objects; ++i) {
      keys.push_back(Mix64(i + 1));
      if (!(*client)->Put("bench", std::span<const BlockKey>(&keys.back(), 1), value, 2).ok()) {
        return state.SkipWithError("put failed");
      }
    }
    NodeId victim = 1;
    for (NodeId n = 2; n <= nodes; ++n) {
      if (node[n]->store().stats().objects > node[victim]->store().stats().objects) victim = n;
    }
    const uint64_t lost_replicas = node[victim]->store().stats().objects;
    RepairAgentOptions ao;
    ao.master_url = url;
    ao.poll_interval = 20 * kMillisecond;
    RepairAgent agent(ao);
    if (!agent.Start().ok()) return state.SkipWithError("no agent");

    const auto stopped = std::chrono::steady_clock::now();
    node[victim]->Stop();
    auto& m = (*client)->master();
    while (true) {
      auto s = m.Stats();
      if (s.ok() && (*s)["nodes_dead"].get<uint64_t>() >= 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double detect = Since(stopped);
    const auto detected = std::chrono::steady_clock::now();
    uint64_t short_of_target = 0;
    while (Since(detected) < 120) {
      auto got = m.Get("bench", keys);
      short_of_target = 0;
      if (got.ok()) {
        for (const Lookup& l : *got) short_of_target += l.replicas.size() < 2 ? 1 : 0;
      }
      if (got.ok() && short_of_target == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double repair = Since(detected);
    state.SetIterationTime(detect + repair);
    const RepairAgentStats rs = agent.stats();
    agent.Stop();
    auto stats = m.Stats();
    state.counters["detect_s"] = detect;
    state.counters["repair_s"] = repair;
    state.counters["replicas_lost"] = static_cast<double>(lost_replicas);
    state.counters["repaired"] = static_cast<double>(rs.done);
    state.counters["repair_MBps"] = static_cast<double>(rs.bytes) / repair / 1e6;
    state.counters["short_of_target"] = static_cast<double>(short_of_target);
    state.counters["lost_objects"] =
        stats.ok() ? (*stats)["objects_lost"].get<double>() : -1.0;
    client->reset();
    for (NodeId n = 1; n <= nodes; ++n) node[n]->Stop();
    master.Stop();
  }
}
BENCHMARK(BM_NodeLossRepair)
    ->Args({6, 1200, 1000})
    ->Args({6, 1200, 100})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);

}  // namespace
}  // namespace myriad
