#pragma once
// The servers' shutdown: SIGINT and SIGTERM are blocked before any thread starts, so every
// thread inherits the mask and the signals are only ever taken by WaitForStopSignal: no handler
// runs in a random thread mid-request.
#include <pthread.h>

#include <csignal>

namespace myriad::cli {

class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  // Blocks until SIGINT or SIGTERM; returns which.
  int Wait() {
    int signal = 0;
    sigwait(&set_, &signal);
    return signal;
  }

 private:
  sigset_t set_;
};

}  // namespace myriad::cli
