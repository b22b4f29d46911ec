#pragma once
// One backend's health as both worlds see it: consecutive request errors eject it (passive
// outlier detection), consecutive failed active checks mark it unhealthy, and an ejected or
// unhealthy backend comes back once its checks pass again. The gateway feeds it real outcomes
// and health checks; the simulator feeds it the requests a crashed unit refuses. Pure: it
// counts what it is told and keeps no time.
#include <cstdint>
#include <string_view>

namespace myriad::policy {

struct BackendHealthOptions {
  // 3: a dead engine refuses at once and each error before ejection costs a client a retry;
  // Envoy's outlier detection waits for 5 consecutive 5xx, which rides out more transient
  // errors at two more retries per dead backend. 0: never eject on errors.
  int eject_after_errors = 3;
  // Failed active checks in a row that mark a backend unhealthy (it then gets no requests).
  int unhealthy_after_failed_checks = 2;
  // Passing active checks in a row that re-admit an ejected backend.
  int readmit_after_passing_checks = 2;
};
// Upper bound of each count above (docs/gateway.md, docs/failures.md).
inline constexpr int kMaxHealthCount = 1000;

enum class HealthChange { kNone, kEjected, kReadmitted, kUnhealthy, kHealthy };
// "", "ejected", "readmitted", "unhealthy", "healthy": the names logs and metrics use.
std::string_view HealthChangeName(HealthChange c);

class BackendHealth {
 public:
  BackendHealth() = default;
  explicit BackendHealth(BackendHealthOptions options) : options_(options) {}

  // A request's outcome. A success resets the error count; the error that reaches
  // eject_after_errors ejects the backend (kEjected, once).
  HealthChange RecordRequest(bool ok);
  // An active check's outcome: failures mark the backend unhealthy; a pass makes an unhealthy
  // one healthy at once, and an ejected one is re-admitted after readmit_after_passing_checks.
  HealthChange RecordCheck(bool ok);
  // Starts over: healthy, not ejected, nothing counted (a rebuilt unit).
  void Reset() { *this = BackendHealth(options_); }

  bool healthy() const { return healthy_; }
  bool ejected() const { return ejected_; }
  bool available() const { return healthy_ && !ejected_; }
  int consecutive_errors() const { return errors_; }
  const BackendHealthOptions& options() const { return options_; }

 private:
  BackendHealthOptions options_;
  bool healthy_ = true;
  bool ejected_ = false;
  int errors_ = 0;         // request errors in a row
  int failed_checks_ = 0;  // active checks failed in a row
  int passed_checks_ = 0;  // active checks passed in a row
};

}  // namespace myriad::policy
