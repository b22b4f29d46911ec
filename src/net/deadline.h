#pragma once
// A connection's I/O deadline without a timer operation per read or write.
//
// Beast's tcp_stream starts and cancels a timer wait around every operation once an expiry is
// set: on a streamed answer (a token is one small read and one small write) that is a
// timerfd_settime call and a cancelled-wait completion per chunk and side. Here an operation
// only stores its deadline (one clock read); one steady_timer per connection waits for the
// earliest deadline it has been asked about, and when it fires early (the deadline has moved
// on) it waits again for the current one. So the timer is touched about once per timeout period,
// or when a deadline is set earlier than the one it waits for.
//
// Single-threaded: call everything from the connection's executor. The owner's completion
// handlers pass their error codes through Check(), which turns the error of an operation
// interrupted by an expiry into beast::error::timeout, as beast's own expiry does.
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <utility>

namespace myriad::net {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Deadline(const boost::asio::any_io_executor& ex) : timer_(ex) {}

  // What to do when a deadline passes (typically: close the socket, so that the pending
  // operations end). `owner` owns this Deadline; the timer's handler holds it weakly, so a
  // waiting timer never keeps a connection alive. Call once, before the first Set().
  void Init(std::weak_ptr<void> owner, std::function<void()> on_expire) {
    owner_ = std::move(owner);
    on_expire_ = std::move(on_expire);
  }

  // Operations from now on must end within `d`.
  template <class Rep, class Period>
  void Set(std::chrono::duration<Rep, Period> d) {
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(d);
    expired_ = false;
    if (!armed_ || deadline_ < armed_for_) Arm(deadline_);
  }

  // No deadline until the next Set() (the timer may still fire once, harmlessly).
  void Clear() { deadline_ = Clock::time_point::max(); }

  // An operation's error as its handler should see it: beast::error::timeout when the
  // operation was cut short by an expiry.
  boost::beast::error_code Check(boost::beast::error_code ec) const {
    if (ec && expired_) return boost::beast::error::timeout;
    return ec;
  }

 private:
  void Arm(Clock::time_point at) {
    armed_ = true;
    armed_for_ = at;
    timer_.expires_at(at);  // cancels a wait in progress: its handler sees operation_aborted
    timer_.async_wait([this, owner = owner_](boost::beast::error_code ec) {
      auto alive = owner.lock();
      if (!alive || ec) return;  // the owner is gone, or Arm() replaced this wait
      OnTimer();
    });
  }

  void OnTimer() {
    armed_ = false;
    if (deadline_ == Clock::time_point::max()) return;
    if (Clock::now() < deadline_) return Arm(deadline_);
    expired_ = true;
    deadline_ = Clock::time_point::max();
    if (on_expire_) on_expire_();
  }

  boost::asio::steady_timer timer_;
  std::weak_ptr<void> owner_;
  std::function<void()> on_expire_;
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point armed_for_{};
  bool armed_ = false;
  bool expired_ = false;
};

}  // namespace myriad::net
