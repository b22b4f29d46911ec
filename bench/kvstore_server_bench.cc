// Benchmarks of kvstore::MasterServer, the KV store master's JSON API over HTTP/1.1:
//   BM_MasterServerExists: POST /v1/exists with `batch` keys (half of them stored) over one
//     keep-alive loopback connection, one request in flight, the server on one io thread.
//     items_per_second counts keys, requests_per_second round trips: the latency-bound rate one
//     synchronous client sees, HTTP parsing, JSON and the master's lookups included.
//   BM_MasterServerExistsInProcess: the same requests through MasterServer::Handle, no
//     sockets: the difference to the above is the cost of the network stack and Beast.
// The master holds 10,000 runs of 4 blocks in one namespace (small: the lookups themselves are
// measured by kvstore_bench.cc's BM_KvBatchExists).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "fmt/format.h"
#include "core/rng.h"
#include "kvstore/master_server.h"
#include "net/http_client.h"

namespace myriad {
namespace {

using kvstore::MasterServer;
using kvstore::MasterServerOptions;

constexpr int kRuns = 10'000;
constexpr int kBlocks = 4;

BlockKey KeyOf(uint64_t run, uint64_t block) { return Mix64((run << 16) | block); }

// A started master with three fault domains, namespace "bench" and kRuns stored runs.
std::unique_ptr<MasterServer> StartedMaster() {
  MasterServerOptions o;
  o.master.dead_after = 1000 * kHour;
  o.http.threads = 1;
  o.http.max_body_bytes = size_t{16} << 20;
  auto server = std::make_unique<MasterServer>(o);
  if (!server->Start().ok()) return nullptr;
  auto post = [&](std::string target, std::string body) {
    net::HttpRequest r;
    r.method = "POST";
    r.target = std::move(target);
    r.body = std::move(body);
    return server->Handle(r).status;
  };
  for (int id = 1; id <= 3; ++id) {
    post("/v1/nodes", fmt::format(R"({{"id":{},"fault_domain":"rack-{}","capacity_bytes":{}}})",
                                  id, id, uint64_t{1} << 50));
  }
  post("/v1/namespaces", R"({"name":"bench"})");
  for (uint64_t run = 0; run < kRuns; ++run) {
    std::string keys;
    for (uint64_t b = 0; b < kBlocks; ++b) {
      keys += fmt::format("{}\"{}\"", b ? "," : "", KeyOf(run, b));
    }
    post("/v1/put/start",
         fmt::format(R"({{"namespace":"bench","keys":[{}],"size":65536,"replicas":2}})", keys));
    post("/v1/put/end", fmt::format(R"({{"namespace":"bench","object":"{}"}})",
                                    KeyOf(run, kBlocks - 1)));
  }
  return server;
}

// `batch` keys, every other one stored, as hex strings (what a client sends).
std::string ExistsBody(int batch) {
  std::string keys;
  for (int i = 0; i < batch; ++i) {
    const BlockKey k = i % 2 == 0 ? KeyOf(static_cast<uint64_t>(i * 7919) % kRuns, i % kBlocks)
                                  : Mix64(uint64_t{1} << 40 | static_cast<uint64_t>(i));
    keys += fmt::format("{}\"0x{:016x}\"", i ? "," : "", k);
  }
  return fmt::format(R"({{"namespace":"bench","keys":[{}]}})", keys);
}

void Report(benchmark::State& state, int batch) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * batch);
  state.counters["requests_per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_MasterServerExists(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  auto server = StartedMaster();
  if (!server) return state.SkipWithError("the master did not start");
  net::HttpClient client({"127.0.0.1", server->port()});
  const std::string body = ExistsBody(batch);
  for (auto _ : state) {
    absl::StatusOr<net::HttpResponse> r = client.Post("/v1/exists", body);
    if (!r.ok() || r->status != 200) return state.SkipWithError("/v1/exists failed");
    benchmark::DoNotOptimize(r->body.data());
  }
  Report(state, batch);
  server->Stop();
}

void BM_MasterServerExistsInProcess(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  auto server = StartedMaster();
  if (!server) return state.SkipWithError("the master did not start");
  net::HttpRequest request;
  request.method = "POST";
  request.target = "/v1/exists";
  request.body = ExistsBody(batch);
  for (auto _ : state) {
    net::HttpResponse r = server->Handle(request);
    benchmark::DoNotOptimize(r.body.data());
  }
  Report(state, batch);
  server->Stop();
}

BENCHMARK(BM_MasterServerExists)->ArgName("batch")->Arg(1)->Arg(16)->Arg(256)->UseRealTime();
BENCHMARK(BM_MasterServerExistsInProcess)->ArgName("batch")->Arg(1)->Arg(16)->Arg(256);

}  // namespace
}  // namespace myriad
