#include "core/clock.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/steady_now.h"

namespace myriad {

namespace {

// Deadlines this far out wait for a wake alone: converting them to a time_point could overflow.
constexpr Nanos kNoDeadline = kNanosInfinite / 2;

class RealSleeper final : public Sleeper {
 public:
  explicit RealSleeper(const Clock& clock) : Sleeper(clock) {}

  bool SleepUntil(Nanos deadline) override {
    std::unique_lock lock(mu_);
    const auto woken = [this] { return woken_; };
    if (deadline >= kNoDeadline) {
      cv_.wait(lock, woken);
    } else {
      cv_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline)),
                     woken);
    }
    return std::exchange(woken_, false);
  }

  void Wake() override {
    {
      std::lock_guard lock(mu_);
      woken_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
};

}  // namespace

bool Sleeper::SleepFor(Nanos d) {
  const Nanos now = clock_.Now();
  return SleepUntil(d >= kNanosInfinite - now ? kNanosInfinite : now + d);
}

Nanos RealClock::Now() const { return SteadyNow(); }

std::unique_ptr<Sleeper> RealClock::NewSleeper() { return std::make_unique<RealSleeper>(*this); }

std::shared_ptr<Clock> DefaultClock() {
  static const std::shared_ptr<Clock> clock = std::make_shared<RealClock>();
  return clock;
}

std::shared_ptr<Clock> OrDefaultClock(std::shared_ptr<Clock> clock) {
  return clock ? std::move(clock) : DefaultClock();
}

// Counted as asleep while it waits with a deadline ahead; whoever ends the sleep (Advance past
// the deadline, Wake) uncounts it at once, so AwaitSleepers right after Advance cannot mistake a
// loop that has not run yet for one that has finished its round.
class ManualClock::ManualSleeper final : public Sleeper {
 public:
  explicit ManualSleeper(ManualClock& clock) : Sleeper(clock), manual_(clock) {
    std::lock_guard lock(manual_.mu_);
    manual_.sleepers_.push_back(this);
  }
  ~ManualSleeper() override {
    std::lock_guard lock(manual_.mu_);
    std::erase(manual_.sleepers_, this);
  }

  bool SleepUntil(Nanos deadline) override {
    std::unique_lock lock(mu_);
    while (!woken_ && manual_.Now() < deadline) {
      if (!counted_) {
        counted_ = true;
        deadline_ = deadline;
        manual_.Asleep(+1);
      }
      cv_.wait(lock);
    }
    Uncount();
    return std::exchange(woken_, false);
  }

  void Wake() override {
    std::lock_guard lock(mu_);
    woken_ = true;
    Uncount();
    cv_.notify_all();
  }

  // Under the clock's mu_, after time moved: holding this sleeper's lock while notifying means
  // a sleeper between its check of Now() and its wait cannot miss the notification.
  void TimeMoved(Nanos now) {
    std::lock_guard lock(mu_);
    if (counted_ && deadline_ <= now) Uncount();
    cv_.notify_all();
  }

 private:
  void Uncount() {
    if (!counted_) return;
    counted_ = false;
    manual_.Asleep(-1);
  }

  ManualClock& manual_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  bool counted_ = false;
  Nanos deadline_ = 0;
};

std::unique_ptr<Sleeper> ManualClock::NewSleeper() { return std::make_unique<ManualSleeper>(*this); }

void ManualClock::Advance(Nanos d) {
  std::lock_guard lock(mu_);
  const Nanos before = now_.load(std::memory_order_relaxed);
  const Nanos now = d <= 0 ? before : d >= kNanosInfinite - before ? kNanosInfinite : before + d;
  now_.store(now, std::memory_order_release);
  for (ManualSleeper* s : sleepers_) s->TimeMoved(now);
}

void ManualClock::Asleep(int delta) {
  {
    std::lock_guard lock(asleep_mu_);
    asleep_ += delta;
  }
  asleep_cv_.notify_all();
}

bool ManualClock::AwaitSleepers(int n, Nanos real_limit) {
  std::unique_lock lock(asleep_mu_);
  return asleep_cv_.wait_for(lock, std::chrono::nanoseconds(real_limit), [&] { return asleep_ >= n; });
}

int ManualClock::sleepers_asleep() const {
  std::lock_guard lock(asleep_mu_);
  return asleep_;
}

}  // namespace myriad
