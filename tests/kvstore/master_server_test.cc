// MasterServer end to end over loopback HTTP: the JSON API, its errors, /metrics, the CLI.
#include "kvstore/master_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/run_myriad.h"
#include "kv_scenario.h"
#include "net/http_client.h"

namespace myriad::kvstore {
namespace {

using nlohmann::json;

class MasterServerTest : public ::testing::Test {
 protected:
  void StartServer(MasterServerOptions options = {}) {
    options.clock = clock_;
    server_ = std::make_unique<MasterServer>(std::move(options));
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<net::HttpClient>(net::HostPort{"127.0.0.1", server_->port()});
  }

  // The answer's status and its body as JSON (null when not JSON).
  std::pair<int, json> Call(std::string_view method, std::string_view target,
                            const std::string& body = {}) {
    absl::StatusOr<net::HttpResponse> r =
        client_->Request(method, target, body, body.empty() ? "" : "application/json");
    EXPECT_TRUE(r.ok()) << std::string(r.status().message());
    if (!r.ok()) return {0, nullptr};
    json j = json::parse(r->body, nullptr, false);
    return {r->status, j.is_discarded() ? json() : j};
  }
  std::pair<int, json> Post(std::string_view target, const json& body) {
    return Call("POST", target, body.dump());
  }

  // Given: two nodes in each of three racks, and namespace "m".
  void GivenCluster() {
    int id = 1;
    for (int rack = 0; rack < 3; ++rack) {
      for (int i = 0; i < 2; ++i, ++id) {
        auto [status, body] = Post("/v1/nodes", {{"id", id},
                                                 {"fault_domain", "rack-" + std::to_string(rack)},
                                                 {"capacity_bytes", uint64_t{1} << 30},
                                                 {"address", "10.0.0." + std::to_string(id)}});
        ASSERT_EQ(status, 201) << body;
      }
    }
    auto [status, body] = Post("/v1/namespaces", {{"name", "m"}});
    ASSERT_EQ(status, 201) << body;
  }

  static std::string Hex(BlockKey k) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(k));
    return buf;
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kSecond);
  std::unique_ptr<MasterServer> server_;
  std::unique_ptr<net::HttpClient> client_;
};

MasterServerOptions LongLivedNodes() {
  MasterServerOptions o;
  o.master.dead_after = kHour;  // the tests move the clock; the nodes must not die of it
  return o;
}

TEST_F(MasterServerTest, PutGetExistsRemoveEndToEnd) {
  StartServer(LongLivedNodes());
  GivenCluster();
  const std::vector<BlockKey> chain = testing::Chain(7, 4);
  std::vector<std::string> keys;
  for (BlockKey k : chain) keys.push_back(Hex(k));

  auto [s1, started] = Post("/v1/put/start",
                            {{"namespace", "m"}, {"keys", keys}, {"size", 4096}, {"replicas", 3}});
  ASSERT_EQ(s1, 200) << started;
  EXPECT_EQ(started["object"], keys.back());
  ASSERT_EQ(started["replicas"].size(), 3u);
  std::set<std::string> domains;
  for (const json& r : started["replicas"]) {
    domains.insert(r["fault_domain"].get<std::string>());
    EXPECT_EQ(r["address"], "10.0.0." + std::to_string(r["id"].get<int>()));
  }
  EXPECT_EQ(domains.size(), 3u) << started;

  // Pending: not yet readable.
  auto [s2, pending] = Post("/v1/get", {{"namespace", "m"}, {"keys", {keys[0]}}});
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(pending["results"][0]["found"], false);
  EXPECT_EQ(pending["results"][0]["pending"], true);

  auto [s3, ended] = Post("/v1/put/end", {{"namespace", "m"}, {"object", keys.back()}});
  ASSERT_EQ(s3, 200) << ended;

  // Any block of the run finds it; a decimal key works as well as hex.
  auto [s4, got] = Post("/v1/get", {{"namespace", "m"},
                                    {"keys", {std::to_string(chain[1]), Hex(12345)}}});
  ASSERT_EQ(s4, 200) << got;
  const json& hit = got["results"][0];
  EXPECT_EQ(hit["found"], true);
  EXPECT_EQ(hit["key"], keys[1]);
  EXPECT_EQ(hit["object"], keys.back());
  EXPECT_EQ(hit["block"], 1);
  EXPECT_EQ(hit["blocks"], 4);
  EXPECT_EQ(hit["size"], 4096);
  EXPECT_EQ(hit["lease_ms"], 10'000);
  domains.clear();
  for (const json& r : hit["replicas"]) domains.insert(r["fault_domain"].get<std::string>());
  EXPECT_EQ(domains.size(), 3u);
  EXPECT_EQ(got["results"][1]["found"], false);

  auto [s5, exists] = Post("/v1/exists", {{"namespace", "m"}, {"keys", {keys[0], "99", keys[3]}}});
  ASSERT_EQ(s5, 200);
  EXPECT_EQ(exists["exists"], json({true, false, true}));

  // Leased by the get: removal is refused per key, the batch itself succeeds.
  auto [s6, refused] = Post("/v1/remove", {{"namespace", "m"}, {"keys", {keys.back(), "99"}}});
  ASSERT_EQ(s6, 200);
  EXPECT_EQ(refused["results"][0]["removed"], false);
  EXPECT_EQ(refused["results"][0]["error"]["type"], "conflict");
  EXPECT_EQ(refused["results"][1]["removed"], false);
  EXPECT_EQ(refused["results"][1]["error"]["type"], "not_found");

  clock_->Advance(11 * kSecond);  // past the lease
  auto [s7, removed] = Post("/v1/remove", {{"namespace", "m"}, {"keys", {keys.back()}}});
  ASSERT_EQ(s7, 200);
  EXPECT_EQ(removed["results"][0]["removed"], true) << removed;
  auto [s8, gone] = Post("/v1/exists", {{"namespace", "m"}, {"keys", {keys[0]}}});
  EXPECT_EQ(gone["exists"], json({false}));

  auto [s9, stats] = Call("GET", "/v1/stats");
  ASSERT_EQ(s9, 200);
  EXPECT_EQ(stats["objects"], 0);
  EXPECT_EQ(stats["nodes_alive"], 6);
  EXPECT_EQ(stats["namespaces"], 1);
  EXPECT_EQ(stats["nodes"].size(), 6u);

  auto [s10, health] = Call("GET", "/health");
  EXPECT_EQ(s10, 200);
  EXPECT_EQ(health["status"], "ok");
}

TEST_F(MasterServerTest, MetricsAreValidPrometheusText) {
  StartServer(LongLivedNodes());
  GivenCluster();
  const std::vector<BlockKey> chain = testing::Chain(3, 2);
  ASSERT_EQ(Post("/v1/put/start", {{"namespace", "m"},
                                   {"keys", {Hex(chain[0]), Hex(chain[1])}},
                                   {"size", 100},
                                   {"replicas", 2}})
                .first,
            200);
  ASSERT_EQ(Post("/v1/put/end", {{"namespace", "m"}, {"object", Hex(chain[1])}}).first, 200);
  ASSERT_EQ(Post("/v1/exists", {{"namespace", "nope"}, {"keys", {"1"}}}).first, 404);

  absl::StatusOr<net::HttpResponse> r = client_->Get("/metrics");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->content_type, "text/plain; version=0.0.4; charset=utf-8");
  // The text format 0.0.4, line by line: comments, or name{labels} value.
  const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$)");
  const std::regex type(R"(^# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|untyped)$)");
  const std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")"
      R"((,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? )"
      R"((NaN|[+-]Inf|[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)$)");
  std::istringstream in(r->body);
  std::string line;
  std::string family;  // of the last TYPE line: the samples that follow must belong to it
  std::set<std::string> families;
  int samples = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE", 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, type)) << line;
      family = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(families.insert(family).second) << "second TYPE line for " << family;
    } else if (line.rfind("#", 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, comment)) << line;
    } else {
      EXPECT_TRUE(std::regex_match(line, sample)) << line;
      EXPECT_EQ(line.rfind(family, 0), 0u) << line << " follows the TYPE of " << family;
      ++samples;
    }
  }
  EXPECT_GT(samples, 20);
  const std::string& body = r->body;
  EXPECT_NE(body.find("\nmyriad_kvstore_objects 1\n"), std::string::npos) << body;
  EXPECT_NE(body.find("\nmyriad_kvstore_blocks 2\n"), std::string::npos);
  EXPECT_NE(body.find("\nmyriad_kvstore_used_bytes 200\n"), std::string::npos);
  EXPECT_NE(body.find("\nmyriad_kvstore_nodes{state=\"alive\"} 6\n"), std::string::npos);
  EXPECT_NE(body.find("\nmyriad_kvstore_requests_total{op=\"put_start\"} 1\n"), std::string::npos);
  EXPECT_NE(body.find("\nmyriad_kvstore_errors_total{op=\"exists\",type=\"not_found\"} 1\n"),
            std::string::npos);
}

TEST_F(MasterServerTest, BadRequestsNameTheField) {
  StartServer(LongLivedNodes());
  GivenCluster();
  auto expect_400 = [&](std::string_view target, const std::string& body, std::string_view param) {
    auto [status, answer] = Call("POST", target, body);
    EXPECT_EQ(status, 400) << target << " " << body << " -> " << answer;
    EXPECT_EQ(answer["error"]["type"], "invalid_request") << answer;
    if (!param.empty()) {
      EXPECT_EQ(answer["error"]["param"], param) << answer;
      EXPECT_NE(answer["error"]["message"].get<std::string>().find(param), std::string::npos)
          << answer;
    }
  };
  expect_400("/v1/put/start", "{not json", "");
  expect_400("/v1/put/start", "[1,2]", "");
  expect_400("/v1/put/start", R"({"keys":["1"],"size":1})", "namespace");
  expect_400("/v1/put/start", R"({"namespace":"m","size":1})", "keys");
  expect_400("/v1/put/start", R"({"namespace":"m","keys":[],"size":1})", "keys");
  expect_400("/v1/put/start", R"({"namespace":"m","keys":["1","zz"],"size":1})", "keys");
  expect_400("/v1/put/start", R"({"namespace":"m","keys":["1"]})", "size");
  expect_400("/v1/put/start", R"({"namespace":"m","keys":["1"],"size":-1})", "size");
  expect_400("/v1/put/start", R"({"namespace":"m","keys":["1"],"size":1,"replicas":9})",
             "replicas");
  expect_400("/v1/put/start", R"({"namespace":"m","keys":["1"],"size":1,"pinned":"yes"})",
             "pinned");
  expect_400("/v1/put/start", R"({"namespace":"m","keys":["1"],"size":1,"checksum":"zz"})",
             "checksum");
  expect_400("/v1/put/start", R"({"namespace":"m","keys":["1"],"size":1,"checksum":-1})",
             "checksum");
  expect_400("/v1/put/end", R"({"namespace":"m"})", "object");
  expect_400("/v1/get", R"({"namespace":7,"keys":["1"]})", "namespace");
  expect_400("/v1/nodes", R"({"id":9,"capacity_bytes":5})", "fault_domain");
  expect_400("/v1/nodes", R"({"id":9,"fault_domain":"r","capacity_bytes":0})", "capacity_bytes");
  expect_400("/v1/namespaces", R"({})", "name");
  auto [s, keys_answer] = Call("POST", "/v1/exists", R"({"namespace":"m","keys":["1",{"a":1}]})");
  EXPECT_NE(keys_answer["error"]["message"].get<std::string>().find("keys[1]"), std::string::npos)
      << keys_answer;
}

// A put's checksum is kept with the object and answered with each get (absent when none).
TEST_F(MasterServerTest, PutChecksumIsAnsweredByGet) {
  StartServer(LongLivedNodes());
  GivenCluster();
  for (const auto& [key, checksum] : {std::pair<std::string, std::string>{"0x31", "0xfeedbeef"},
                                      std::pair<std::string, std::string>{"0x32", ""}}) {
    json put = {{"namespace", "m"}, {"keys", {key}}, {"size", 10}, {"replicas", 2}};
    if (!checksum.empty()) put["checksum"] = checksum;
    auto [s1, started] = Post("/v1/put/start", put);
    ASSERT_EQ(s1, 200) << started;
    auto [s2, ended] = Post("/v1/put/end", {{"namespace", "m"}, {"object", key}});
    ASSERT_EQ(s2, 200) << ended;
  }
  auto [s3, got] = Post("/v1/get", {{"namespace", "m"}, {"keys", {"0x31", "0x32"}}});
  ASSERT_EQ(s3, 200) << got;
  EXPECT_EQ(got["results"][0]["checksum"], Hex(0xfeedbeef)) << got;
  EXPECT_FALSE(got["results"][1].contains("checksum")) << got;
}

// An unauthenticated registration of capacity 2^64-1 wrapped the cluster's capacity and a
// PutStart of 2^64-1 bytes was accepted; both are 400s naming the field and its bound.
TEST_F(MasterServerTest, SizesAboveTheirBoundsAreRefusedNamingTheField) {
  StartServer(LongLivedNodes());
  GivenCluster();
  auto [status, body] = Post("/v1/nodes", {{"id", 40},
                                           {"fault_domain", "rack-9"},
                                           {"capacity_bytes", UINT64_MAX}});
  EXPECT_EQ(status, 400) << body;
  EXPECT_EQ(body["error"]["param"], "capacity_bytes") << body;
  EXPECT_NE(body.dump().find(std::to_string(kMaxNodeCapacityBytes)), std::string::npos) << body;
  auto [put_status, put_body] =
      Post("/v1/put/start", {{"namespace", "m"}, {"keys", {"0x1"}}, {"size", UINT64_MAX}});
  EXPECT_EQ(put_status, 400) << put_body;
  EXPECT_EQ(put_body["error"]["param"], "size") << put_body;
  auto [stats_status, stats] = Call("GET", "/v1/stats");
  EXPECT_EQ(stats["capacity_bytes"], uint64_t{6} << 30) << stats;
}

TEST_F(MasterServerTest, DeeplyNestedBodyIsRefusedAndServerGoesOn) {
  StartServer(LongLivedNodes());
  const std::string deep = R"({"namespace":"m","keys":)" + std::string(200'000, '[') +
                           std::string(200'000, ']') + "}";
  auto [status, answer] = Call("POST", "/v1/exists", deep);
  EXPECT_EQ(status, 400);
  EXPECT_NE(answer["error"]["message"].get<std::string>().find("nests deeper"), std::string::npos)
      << answer;
  // Brackets inside strings do not count.
  auto [s2, a2] = Call("POST", "/v1/namespaces", R"({"name":")" + std::string(100, '[') + R"("})");
  EXPECT_EQ(s2, 201) << a2;
  // A bad key is described, not echoed whole.
  auto [s3, a3] = Call("POST", "/v1/exists",
                       R"({"namespace":"m","keys":[[[1,2,3]]]})");
  EXPECT_EQ(s3, 400);
  EXPECT_NE(a3["error"]["message"].get<std::string>().find("keys[0]: a JSON array"),
            std::string::npos)
      << a3;
  EXPECT_EQ(Call("GET", "/health").first, 200);
}

TEST_F(MasterServerTest, ErrorStatusCodes) {
  MasterServerOptions options = LongLivedNodes();
  options.http.max_body_bytes = 4096;
  StartServer(options);
  GivenCluster();
  auto expect = [&](std::string_view method, std::string_view target, const std::string& body,
                    int status, std::string_view type) {
    auto [got, answer] = Call(method, target, body);
    EXPECT_EQ(got, status) << method << " " << target << " -> " << answer;
    EXPECT_EQ(answer["error"]["type"], type) << answer;
  };
  expect("POST", "/v1/exists", R"({"namespace":"nope","keys":["1"]})", 404, "not_found");
  expect("POST", "/v1/put/end", R"({"namespace":"m","object":"5"})", 404, "not_found");
  expect("POST", "/v1/namespaces", R"({"name":"m"})", 409, "conflict");
  expect("POST", "/v1/nodes", R"({"id":1,"fault_domain":"r","capacity_bytes":5})", 409,
         "conflict");
  // Four replicas need four fault domains; there are three.
  expect("POST", "/v1/put/start", R"({"namespace":"m","keys":["1"],"size":1,"replicas":4})", 503,
         "unavailable");
  EXPECT_EQ(Call("POST", "/v1/put/start", R"({"namespace":"m","keys":["1"],"size":1})").first,
            200);
  expect("POST", "/v1/put/start", R"({"namespace":"m","keys":["1"],"size":1})", 409, "conflict");
  expect("GET", "/v1/nowhere", "", 404, "not_found");
  expect("GET", "/v1/put/start", "", 405, "method_not_allowed");
  expect("POST", "/v1/nodes/77/heartbeat", "", 404, "not_found");
  expect("POST", "/v1/nodes/x/heartbeat", "", 400, "invalid_request");
  std::string big = R"({"namespace":"m","keys":[)";
  for (int i = 0; i < 1000; ++i) big += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
  big += "]}";
  expect("POST", "/v1/exists", big, 413, "payload_too_large");
  EXPECT_EQ(Call("POST", "/v1/nodes/1/heartbeat").first, 200);
  expect("DELETE", "/v1/namespaces/nope", "", 404, "not_found");
  EXPECT_EQ(Call("DELETE", "/v1/namespaces/m").first, 200);
  expect("POST", "/v1/exists", R"({"namespace":"m","keys":["1"]})", 404, "not_found");
}

// The housekeeping thread declares them, on the injected clock's schedule: no sleeping, and no
// direct Tick() call standing in for the loop.
TEST_F(MasterServerTest, SilentNodesAreDeclaredDeadByTheTickLoopInVirtualTime) {
  StartServer();  // dead_after: 10 s of the injected clock
  GivenCluster();
  clock_->Advance(5 * kSecond);
  ASSERT_TRUE(clock_->AwaitSleepers(1));  // the tick this woke has run: nobody is dead yet
  EXPECT_EQ(Call("GET", "/v1/stats").second["nodes_dead"], 0);
  for (int id = 1; id <= 3; ++id) {
    ASSERT_EQ(Call("POST", "/v1/nodes/" + std::to_string(id) + "/heartbeat").first, 200);
  }
  clock_->Advance(6 * kSecond);  // 11 s since nodes 4-6 were heard of, 6 s for nodes 1-3
  ASSERT_TRUE(clock_->AwaitSleepers(1));
  auto [status, answer] = Call("POST", "/v1/nodes/4/heartbeat");
  EXPECT_EQ(status, 404);
  EXPECT_NE(answer["error"]["message"].get<std::string>().find("declared dead"), std::string::npos)
      << answer;
  absl::StatusOr<net::HttpResponse> m = client_->Get("/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->body.find("\nmyriad_kvstore_nodes{state=\"alive\"} 3\n"), std::string::npos);
  EXPECT_NE(m->body.find("\nmyriad_kvstore_nodes{state=\"dead\"} 3\n"), std::string::npos);
  // Registering again brings a node back.
  ASSERT_EQ(Post("/v1/nodes", {{"id", 4}, {"fault_domain", "rack-1"}, {"capacity_bytes", 10}})
                .first,
            201);
  EXPECT_EQ(Call("GET", "/v1/stats").second["nodes_dead"], 2);
}

TEST_F(MasterServerTest, CliTalksToTheMaster) {
  StartServer(LongLivedNodes());
  GivenCluster();
  const std::string url = "http://127.0.0.1:" + std::to_string(server_->port());
  auto put = myriad::testing::RunMyriad("kvstore put --master " + url +
                                        " --namespace cli --create-namespace --keys 0x1,0x2 "
                                        "--size 64 --replicas 2");
  ASSERT_EQ(put.code, 0) << put.out;
  EXPECT_NE(put.out.find("\"object\": \"0x0000000000000002\""), std::string::npos) << put.out;
  auto get = myriad::testing::RunMyriad("kvstore get --master " + url +
                                        " --namespace cli --keys 1,3");
  ASSERT_EQ(get.code, 0) << get.out;
  EXPECT_NE(get.out.find("\"found\": true"), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("\"found\": false"), std::string::npos) << get.out;
  auto stat = myriad::testing::RunMyriad("kvstore stat --master " + url);
  ASSERT_EQ(stat.code, 0) << stat.out;
  EXPECT_NE(stat.out.find("\"objects\": 1"), std::string::npos) << stat.out;
  auto bad = myriad::testing::RunMyriad("kvstore get --master " + url + " --namespace nope --keys 1");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("404"), std::string::npos) << bad.out;
}

TEST(MasterProcessTest, ServesUntilSigterm) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execl(MYRIAD_BINARY, MYRIAD_BINARY, "kvstore", "master", "--listen", "127.0.0.1:0",
          "--threads", "2", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  FILE* f = fdopen(out[0], "r");
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof(line), f), nullptr);
  const std::string text(line);
  const size_t colon = text.rfind(':');
  ASSERT_NE(text.find("listening on http://127.0.0.1:"), std::string::npos) << text;
  const auto port = static_cast<uint16_t>(std::stoi(text.substr(colon + 1)));
  net::HttpClient client({"127.0.0.1", port});
  absl::StatusOr<net::HttpResponse> r = client.Get("/health");
  ASSERT_TRUE(r.ok()) << std::string(r.status().message());
  EXPECT_EQ(r->status, 200);
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  fclose(f);
}

}  // namespace
}  // namespace myriad::kvstore
