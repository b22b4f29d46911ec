// `myriad kvstore node`, `put --file` and `get --out` as a user runs them: a node process
// registers with an in-process master, the CLI writes a file's bytes to it and reads them back,
// and SIGTERM stops the node.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../cli/run_myriad.h"
#include "kv_cluster.h"
#include "net/http_client.h"
#include "../test_util/read_file.h"

namespace myriad::kvstore {
namespace {

using myriad::test::ReadFile;

using testing::KvCluster;
using testing::WaitFor;

// Starts `myriad kvstore node` with `args` after the binary's name, its output to `log`; the
// child's pid (or -1).
pid_t StartNode(const std::string& log, const std::vector<std::string>& args) {
  // Everything the child needs is prepared before fork: between fork and exec a threaded
  // process may only make async-signal-safe calls.
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(MYRIAD_BINARY));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    execv(MYRIAD_BINARY, argv.data());
    _exit(127);
  }
  close(fd);
  return pid;
}

// Whether the master at `url` counts one live node.
bool OneNodeAlive(const std::string& url) {
  auto s = net::HttpClient::FromUrl(url);
  if (!s.ok()) return false;
  auto r = (*s)->Get("/v1/stats");
  return r.ok() && r->body.find("\"nodes_alive\":1") != std::string::npos;
}

TEST(StorageCliTest, NodeProcessServesPutFileAndGetOut) {
  KvCluster cluster;
  const std::string log = (myriad::testing::TestTempDir() / "node.log").string();
  const std::string url = cluster.url();
  const pid_t pid = StartNode(log, {"kvstore", "node", "--master", url, "--id", "9", "--fault-domain", "rack-9",
                                    "--capacity", "33554432", "--segment-bytes", "16777216", "--listen",
                                    "127.0.0.1:0", "--heartbeat", "0.1"});
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(WaitFor([&] { return OneNodeAlive(url); }, 10 * kSecond)) << ReadFile(log);

  std::string bytes(200'000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + 7);
  const std::string in = myriad::testing::WriteTempFile("kv_in.bin", bytes);
  const std::string out = (myriad::testing::TestTempDir() / "kv_out.bin").string();
  auto put = myriad::testing::RunMyriad(fmt::format(
      "kvstore put --master {} --namespace m/v1 --keys 0x10,0x11 --file {} --create-namespace", url, in));
  EXPECT_EQ(put.code, 0) << put.out;
  EXPECT_NE(put.out.find("\"bytes\": 200000"), std::string::npos) << put.out;
  auto get = myriad::testing::RunMyriad(
      fmt::format("kvstore get --master {} --namespace m/v1 --keys 0x10 --out {}", url, out));
  EXPECT_EQ(get.code, 0) << get.out;
  EXPECT_EQ(ReadFile(out), bytes);
  auto missing = myriad::testing::RunMyriad(
      fmt::format("kvstore get --master {} --namespace m/v1 --keys 0x99 --out {}", url, out));
  EXPECT_EQ(missing.code, 1) << missing.out;
  EXPECT_NE(missing.out.find("no key"), std::string::npos) << missing.out;

  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string printed = ReadFile(log);
  EXPECT_NE(printed.find("data path on 127.0.0.1:"), std::string::npos) << printed;
  EXPECT_NE(printed.find("SIGTERM, stopping"), std::string::npos) << printed;
}

// The same with `--shm-socket`: the CLI's put and get (on this host) go through the node's
// shared-memory path, which the node's metrics show, and the bytes are the file's.
TEST(StorageCliTest, NodeWithShmSocketServesTheCliThroughSharedMemory) {
  KvCluster cluster;
  const auto tmp = myriad::testing::TestTempDir();
  const std::string log = (tmp / "myriad_test_shm_node.log").string();
  const std::string sock = (tmp / fmt::format("myriad_test_node_{}.sock", getpid())).string();
  const std::string url = cluster.url();
  const pid_t pid = StartNode(log, {"kvstore", "node", "--master", url, "--id", "8", "--fault-domain", "rack-8",
                                    "--capacity", "33554432", "--segment-bytes", "16777216", "--listen",
                                    "127.0.0.1:0", "--heartbeat", "0.1", "--metrics-port", "0", "--shm-socket",
                                    sock});
  ASSERT_GT(pid, 0);
  std::string metrics_url;
  EXPECT_TRUE(WaitFor(
      [&] {
        const std::string printed = ReadFile(log);
        const size_t at = printed.find("metrics on ");
        if (at == std::string::npos) return false;
        const size_t end = printed.find("/metrics", at);
        metrics_url = printed.substr(at + 11, end - at - 11);
        return std::filesystem::exists(sock);
      },
      10 * kSecond))
      << ReadFile(log);
  EXPECT_NE(ReadFile(log).find("same-host shared memory on " + sock), std::string::npos);

  std::string bytes(300'000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 17 + 3);
  const std::string in = myriad::testing::WriteTempFile("kv_shm_in.bin", bytes);
  const std::string out = (tmp / "myriad_test_kv_shm_out.bin").string();
  ASSERT_TRUE(WaitFor([&] { return OneNodeAlive(url); }, 10 * kSecond)) << ReadFile(log);
  auto put = myriad::testing::RunMyriad(fmt::format(
      "kvstore put --master {} --namespace s --keys 0x20 --file {} --create-namespace", url, in));
  EXPECT_EQ(put.code, 0) << put.out;
  auto get = myriad::testing::RunMyriad(
      fmt::format("kvstore get --master {} --namespace s --keys 0x20 --out {}", url, out));
  EXPECT_EQ(get.code, 0) << get.out;
  EXPECT_EQ(ReadFile(out), bytes);
  auto http = net::HttpClient::FromUrl(metrics_url);
  ASSERT_TRUE(http.ok()) << metrics_url;
  auto m = (*http)->Get("/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->body.find("myriad_kvnode_shm_ops_total{op=\"put\"} 1"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("myriad_kvnode_shm_ops_total{op=\"get\"} 1"), std::string::npos) << m->body;

  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(std::filesystem::exists(sock));  // removed at stop
}

// `kvstore node --capacity 2^64-1` tried to map 2^64 bytes; `kvstore put --file DIR` threw
// out of the read. Both are bad input: exit 2 with the flag and the bound named.
TEST(StorageCliTest, OutOfBoundSizesAndADirectoryAreBadInput) {
  auto node = myriad::testing::RunMyriad(
      "kvstore node --master http://127.0.0.1:1 --id 1 --fault-domain a --capacity "
      "18446744073709551615 --listen 127.0.0.1:0");
  EXPECT_EQ(node.code, 2) << node.out;
  EXPECT_NE(node.out.find("--capacity 18446744073709551615 is outside [1, 1125899906842624]"),
            std::string::npos)
      << node.out;
  auto segment = myriad::testing::RunMyriad(
      "kvstore node --master http://127.0.0.1:1 --id 1 --fault-domain a --segment-bytes "
      "18446744073709551615 --listen 127.0.0.1:0");
  EXPECT_EQ(segment.code, 2) << segment.out;
  EXPECT_NE(segment.out.find("--segment-bytes"), std::string::npos) << segment.out;

  const std::string dir = (myriad::testing::TestTempDir() / "a_directory").string();
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  auto put = myriad::testing::RunMyriad(
      fmt::format("kvstore put --master http://127.0.0.1:1 --namespace n --keys 0x1 --file {}", dir));
  EXPECT_EQ(put.code, 2) << put.out;
  EXPECT_NE(put.out.find("--file: '" + dir + "' is a directory"), std::string::npos) << put.out;
  auto size = myriad::testing::RunMyriad(
      "kvstore put --master http://127.0.0.1:1 --namespace n --keys 0x1 --size 18446744073709551615");
  EXPECT_EQ(size.code, 2) << size.out;
  EXPECT_NE(size.out.find("exceeds the maximum object size 4294967296"), std::string::npos)
      << size.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace myriad::kvstore
