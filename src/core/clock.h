#pragma once
// Clock: where the servers' decision loops read time and sleep (LevelDB's Env, for time only).
// Servers take one through their options (null: the real clock); tests hand them a ManualClock
// and step time with Advance() instead of sleeping, so lease expiry, liveness, fencing and
// health rounds are tested deterministically and fast.
//
// Only decisions go through it. Transport deadlines stay on the real steady clock
// (core/steady_now.h): socket timeouts in net/ (Asio deadlines), HTTP long polls, retry back-offs
// after a network error and the KV store's replication-ack wait; a ManualClock would stall
// them forever, and nothing is decided by them that a test needs to step.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "core/time.h"

namespace myriad {

class Clock;

// One thread's interruptible sleep on a clock. SleepUntil returns when the clock reaches the
// deadline or when Wake() was called (during the sleep or before it: a wake is never lost; it
// is consumed by the sleep it ends). Wake() may be called from any thread; one loop sleeps on
// each Sleeper at a time.
class Sleeper {
 public:
  virtual ~Sleeper() = default;
  // True when woken, false when the deadline passed.
  virtual bool SleepUntil(Nanos deadline) = 0;
  virtual void Wake() = 0;
  // SleepUntil(now + d), saturating (kNanosInfinite: until woken).
  bool SleepFor(Nanos d);

 protected:
  explicit Sleeper(const Clock& clock) : clock_(clock) {}
  const Clock& clock_;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds; the origin is the clock's own.
  virtual Nanos Now() const = 0;
  // A sleeper on this clock; the clock must outlive it.
  virtual std::unique_ptr<Sleeper> NewSleeper() = 0;
};

// The monotonic clock (steady_clock).
class RealClock final : public Clock {
 public:
  Nanos Now() const override;
  std::unique_ptr<Sleeper> NewSleeper() override;
};

// The process's one RealClock, shared: what a server uses when its options name no clock.
std::shared_ptr<Clock> DefaultClock();
// `clock`, or the default clock when null.
std::shared_ptr<Clock> OrDefaultClock(std::shared_ptr<Clock> clock);

// Time that moves only when a test calls Advance. Advance wakes, before it returns, every
// sleeper whose deadline it passed (they then run on their own threads); AwaitSleepers lets the
// test wait until the loops it woke have finished their round and gone back to sleep.
class ManualClock final : public Clock {
 public:
  // Sleepers made by it must be destroyed before it (the servers holding them share it).
  explicit ManualClock(Nanos start = kSecond) : now_(start) {}

  Nanos Now() const override { return now_.load(std::memory_order_acquire); }
  std::unique_ptr<Sleeper> NewSleeper() override;

  // Moves time forward by d >= 0 (a negative d is ignored: time never goes back).
  void Advance(Nanos d);
  // Blocks until at least n sleepers are asleep with a deadline still ahead of Now(), or
  // `real_limit` of real time passed (a loop stuck elsewhere must fail a test, not hang it);
  // returns whether they are.
  bool AwaitSleepers(int n, Nanos real_limit = 10 * kSecond);
  int sleepers_asleep() const;

 private:
  class ManualSleeper;
  friend class ManualSleeper;
  void Asleep(int delta);

  std::atomic<Nanos> now_;
  // Lock order: mu_, then a sleeper's own lock, then asleep_mu_ (a leaf).
  std::mutex mu_;  // guards sleepers_; serializes Advance
  std::vector<ManualSleeper*> sleepers_;
  mutable std::mutex asleep_mu_;
  std::condition_variable asleep_cv_;
  int asleep_ = 0;
};

}  // namespace myriad
