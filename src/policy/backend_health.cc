#include "policy/backend_health.h"

namespace myriad::policy {

std::string_view HealthChangeName(HealthChange c) {
  switch (c) {
    case HealthChange::kNone: return "";
    case HealthChange::kEjected: return "ejected";
    case HealthChange::kReadmitted: return "readmitted";
    case HealthChange::kUnhealthy: return "unhealthy";
    case HealthChange::kHealthy: return "healthy";
  }
  return "";
}

HealthChange BackendHealth::RecordRequest(bool ok) {
  if (ok) {
    errors_ = 0;
    return HealthChange::kNone;
  }
  ++errors_;
  if (!ejected_ && options_.eject_after_errors > 0 && errors_ >= options_.eject_after_errors) {
    ejected_ = true;
    passed_checks_ = 0;  // re-admission needs passes after the ejection
    return HealthChange::kEjected;
  }
  return HealthChange::kNone;
}

HealthChange BackendHealth::RecordCheck(bool ok) {
  if (!ok) {
    passed_checks_ = 0;
    ++failed_checks_;
    if (healthy_ && failed_checks_ >= options_.unhealthy_after_failed_checks) {
      healthy_ = false;
      return HealthChange::kUnhealthy;
    }
    return HealthChange::kNone;
  }
  failed_checks_ = 0;
  ++passed_checks_;
  if (!healthy_) {
    healthy_ = true;
    errors_ = 0;
    return HealthChange::kHealthy;
  }
  if (ejected_ && passed_checks_ >= options_.readmit_after_passing_checks) {
    ejected_ = false;
    errors_ = 0;
    return HealthChange::kReadmitted;
  }
  return HealthChange::kNone;
}

}  // namespace myriad::policy
