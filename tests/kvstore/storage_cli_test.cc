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

#include "../cli/run_myriad.h"
#include "kv_cluster.h"
#include "net/http_client.h"

namespace myriad::kvstore {
namespace {

using testing::KvCluster;
using testing::WaitFor;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(StorageCliTest, NodeProcessServesPutFileAndGetOut) {
  KvCluster cluster;
  const std::string log = (std::filesystem::temp_directory_path() / "myriad_test_node.log").string();
  // Everything the child needs is prepared before fork: between fork and exec a threaded
  // process may only make async-signal-safe calls.
  const std::string url = cluster.url();
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    execl(MYRIAD_BINARY, MYRIAD_BINARY, "kvstore", "node", "--master", url.c_str(), "--id", "9",
          "--fault-domain", "rack-9", "--capacity", "33554432", "--segment-bytes", "16777216",
          "--listen", "127.0.0.1:0", "--heartbeat", "0.1", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fd);
  auto registered = [&] {
    auto s = net::HttpClient::FromUrl(cluster.url());
    if (!s.ok()) return false;
    auto r = (*s)->Get("/v1/stats");
    return r.ok() && r->body.find("\"nodes_alive\":1") != std::string::npos;
  };
  EXPECT_TRUE(WaitFor(registered, 10 * kSecond)) << Slurp(log);

  std::string bytes(200'000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + 7);
  const std::string in = myriad::testing::WriteTempFile("kv_in.bin", bytes);
  const std::string out = (std::filesystem::temp_directory_path() / "myriad_test_kv_out.bin").string();
  auto put = myriad::testing::RunMyriad(fmt::format(
      "kvstore put --master {} --namespace m/v1 --keys 0x10,0x11 --file {} --create-namespace", url, in));
  EXPECT_EQ(put.code, 0) << put.out;
  EXPECT_NE(put.out.find("\"bytes\": 200000"), std::string::npos) << put.out;
  auto get = myriad::testing::RunMyriad(
      fmt::format("kvstore get --master {} --namespace m/v1 --keys 0x10 --out {}", url, out));
  EXPECT_EQ(get.code, 0) << get.out;
  EXPECT_EQ(Slurp(out), bytes);
  auto missing = myriad::testing::RunMyriad(
      fmt::format("kvstore get --master {} --namespace m/v1 --keys 0x99 --out {}", url, out));
  EXPECT_EQ(missing.code, 1) << missing.out;
  EXPECT_NE(missing.out.find("no key"), std::string::npos) << missing.out;

  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string printed = Slurp(log);
  EXPECT_NE(printed.find("data path on 127.0.0.1:"), std::string::npos) << printed;
  EXPECT_NE(printed.find("SIGTERM, stopping"), std::string::npos) << printed;
}

}  // namespace
}  // namespace myriad::kvstore
