// The data path's transfers (kvstore/data_conn.h) on a loopback pair: a payload moves in as few
// system calls as the socket allows, not in Asio's default 64 KiB steps.
#include <gtest/gtest.h>
#include <sys/ioctl.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "kvstore/data_conn.h"

namespace myriad::kvstore {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// A socket that counts the read_some / write_some calls a composed transfer makes of it: each
// is one recvmsg or sendmsg when the socket is ready.
struct CountingStream {
  using executor_type = tcp::socket::executor_type;
  executor_type get_executor() { return socket.get_executor(); }
  template <class Buffers, class Handler>
  auto async_write_some(const Buffers& b, Handler&& h) {
    ++writes;
    return socket.async_write_some(b, std::forward<Handler>(h));
  }
  template <class Buffers, class Handler>
  auto async_read_some(const Buffers& b, Handler&& h) {
    ++reads;
    return socket.async_read_some(b, std::forward<Handler>(h));
  }
  tcp::socket& socket;
  int writes = 0;
  int reads = 0;
};

TEST(DataConn, AMiBPayloadMovesInOneCallEachWay) {
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  tcp::socket sender(io), receiver(io);
  sender.open(tcp::v4());
  SetBuffers(sender, 4 << 20);  // as ConnectTo and the node's accept set them
  sender.connect(acceptor.local_endpoint());
  acceptor.accept(receiver);
  SetBuffers(receiver, 4 << 20);

  constexpr size_t kMiB = size_t{1} << 20;
  const std::string out(kMiB, 'x');
  CountingStream send{sender};
  boost::system::error_code sent_ec;
  size_t sent = 0;
  asio::async_write(send, asio::buffer(out), kWhole,
                    [&](boost::system::error_code ec, size_t n) { sent_ec = ec, sent = n; });
  io.run();
  ASSERT_FALSE(sent_ec) << sent_ec.message();
  ASSERT_EQ(sent, kMiB);
  // Asio's default condition (transfer_all) made 16 calls of 64 KiB here.
  EXPECT_EQ(send.writes, 1);

  // Once every byte has arrived, one call takes them all.
  int queued = 0;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
       std::chrono::steady_clock::now() < until;) {
    ASSERT_EQ(ioctl(receiver.native_handle(), FIONREAD, &queued), 0);
    if (queued == static_cast<int>(kMiB)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(queued, static_cast<int>(kMiB));
  std::string in(kMiB, '\0');
  CountingStream recv{receiver};
  size_t got = 0;
  asio::async_read(recv, asio::buffer(in), kWhole,
                   [&](boost::system::error_code, size_t n) { got = n; });
  io.restart();
  io.run();
  ASSERT_EQ(got, kMiB);
  EXPECT_EQ(recv.reads, 1);
  EXPECT_EQ(in, out);
}

}  // namespace
}  // namespace myriad::kvstore
