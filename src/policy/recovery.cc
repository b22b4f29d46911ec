#include "policy/recovery.h"

namespace myriad::policy {

std::string_view StageName(RecoveryStage s) {
  switch (s) {
    case RecoveryStage::kEject: return "eject";
    case RecoveryStage::kStop: return "stop";
    case RecoveryStage::kSpare: return "spare";
    case RecoveryStage::kLoad: return "load_weights";
    case RecoveryStage::kCommInit: return "comm_init";
    case RecoveryStage::kWarmup: return "warmup";
    case RecoveryStage::kReadiness: return "readiness";
    case RecoveryStage::kDone: return "done";
  }
  return "?";
}

}  // namespace myriad::policy
