#pragma once
// EtcdDiscovery: keeps the gateway's set of etcd-registered backends in step with the keys under
// a prefix. It lists the prefix, delivers every valid registration, then watches from the next
// revision and delivers puts and deletes as they happen. A dropped watch, an unreachable etcd or
// a compaction ends in a fresh list (with backoff) that is reconciled against what was
// delivered, so registrations removed meanwhile are deleted too.
//
// The callbacks run on the discovery thread, one at a time, never after Stop returns; they may
// call into the gateway (AddBackend(config, /*from_etcd=*/true), RemoveBackend(name)) but must
// not call Stop.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/time.h"
#include "gateway/config.h"

namespace myriad::gateway {

struct EtcdDiscoveryOptions {
  std::string endpoint = "http://127.0.0.1:2379";
  std::string prefix = "/myriad/backends/";
  Nanos connect_timeout = 2 * kSecond;
  Nanos request_timeout = 5 * kSecond;  // one range request
  // A watch that carries nothing for this long is restarted (list + watch); etcd's progress
  // notifications (asked for) keep a healthy one under it.
  Nanos watch_idle_timeout = 15 * 60 * kSecond;
  Nanos initial_backoff = 100 * kMillisecond;
  Nanos max_backoff = 5 * kSecond;
};

struct EtcdDiscoveryCallbacks {
  std::function<void(BackendConfig)> on_put;            // a new or changed registration
  std::function<void(const std::string& name)> on_delete;
  // Invalid registrations (the key is skipped) and etcd being unreachable (retried); optional.
  std::function<void(absl::Status)> on_error;
};

struct EtcdDiscoveryStats {
  uint64_t lists = 0;       // successful range requests
  uint64_t watches = 0;     // watch streams started
  uint64_t puts = 0, deletes = 0, errors = 0;  // callbacks delivered
  int64_t revision = 0;     // the last revision seen
};

class EtcdDiscovery {
 public:
  EtcdDiscovery();
  ~EtcdDiscovery();  // Stop()
  EtcdDiscovery(const EtcdDiscovery&) = delete;
  EtcdDiscovery& operator=(const EtcdDiscovery&) = delete;

  // Checks the options and starts the discovery thread; the first list happens on it. Errors:
  // kInvalidArgument naming the option, kFailedPrecondition when already started.
  absl::Status Start(EtcdDiscoveryOptions options, EtcdDiscoveryCallbacks callbacks);
  // Cancels any request in flight and joins the thread; prompt (no request timeout is waited).
  void Stop();

  // Waits until the first list has been delivered; false on timeout (etcd unreachable).
  bool WaitSynced(Nanos timeout);
  EtcdDiscoveryStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace myriad::gateway
