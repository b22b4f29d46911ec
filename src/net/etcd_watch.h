#pragma once
// EtcdWatch: one watch stream on one etcd key (etcd's JSON gateway, POST /v3/watch), delivering
// its events as they come. The callbacks run on the watch's own io thread, one at a time; they
// must be quick (set a flag, notify). on_end runs once, when the stream ends for any reason (the
// server cancelled it, e.g. after a compaction; etcd went away; Stop), after which the caller
// starts a new watch if it still cares. Used by the KV store masters' election: a standby
// watches the leader key and campaigns as soon as it is deleted.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/time.h"
#include "net/etcd_codec.h"

namespace myriad::net {

struct EtcdWatchCallbacks {
  std::function<void(const EtcdWatchEvent&)> on_event;
  std::function<void(absl::Status)> on_end;
};

class EtcdWatch {
 public:
  EtcdWatch();
  ~EtcdWatch();  // Stop()
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // Watches `key` from `start_revision` (0: from now). One stream at a time: a second Start
  // stops the first.
  absl::Status Start(std::string_view endpoint, std::string_view key, int64_t start_revision,
                     EtcdWatchCallbacks callbacks, Nanos connect_timeout = 2 * kSecond);
  // Ends the stream. on_end may still run once, later, on the io thread (kCancelled): the
  // callbacks must stay valid until this object is destroyed, which waits for them.
  void Stop();
  // True from Start until the stream ends.
  bool active() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace myriad::net
