#pragma once
// The data-path benchmarks' loops, shared by the TCP node (kvstore_data_bench.cc) and the node
// that also serves the same-host shared-memory path (kvstore_shm_bench.cc). `Node` gives
// address(); `Check(client)` says why the setup is unusable ("" when it is fine).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>
#include <vector>

#include "kvstore/data_client.h"

namespace myriad::kvstore_bench {

constexpr size_t kMiB = size_t{1} << 20;

// One 1 MiB object written again and again under one name.
template <class Node>
void Put1MiB(benchmark::State& state) {
  Node node;
  kvstore::DataClient client(node.address());
  if (const std::string why = node.Check(client); !why.empty()) return state.SkipWithError(why.c_str());
  const std::string value(kMiB, 'v');
  for (auto _ : state) {
    if (!client.Put({1, 42}, value).ok()) state.SkipWithError("put failed");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kMiB));
}

// range(0) objects of 1 MiB read in one batched get.
template <class Node>
void BatchGet(benchmark::State& state) {
  const auto batch = static_cast<size_t>(state.range(0));
  Node node;
  kvstore::DataClient client(node.address());
  if (const std::string why = node.Check(client); !why.empty()) return state.SkipWithError(why.c_str());
  std::vector<kvstore::ObjectName> names;
  for (size_t i = 0; i < batch; ++i) {
    names.push_back({1, i});
    if (!client.Put(names.back(), std::string(kMiB, static_cast<char>('a' + i))).ok()) {
      return state.SkipWithError("put failed");
    }
  }
  std::vector<std::string> values;
  std::vector<absl::StatusCode> codes;
  for (auto _ : state) {
    if (!client.Get(names, &values, &codes).ok()) state.SkipWithError("get failed");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * batch * kMiB));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batch));
}

}  // namespace myriad::kvstore_bench
