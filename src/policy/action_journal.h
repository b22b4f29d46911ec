#pragma once
// Which of the controller's actions were taken already, so that a new leader (after the old one
// died mid-incident) does not repeat one. An action's id is "TARGET/INCARNATION/KIND/ATTEMPT":
// the target's incarnation counts its incidents that ended (a readmit or a cordon closes one),
// the attempt is the nth action of that kind within the incident (a restart after
// restart_timeout is attempt 2). The driver records an id in etcd before it acts, and a new
// leader loads the recorded ids, so the same decision made again maps to the same id and is
// skipped. Only actions that change the world are journaled (drain, restart, readmit, cordon);
// probes only read. At most once: an action recorded by a leader that died before carrying it
// out is not carried out by the next one. Pure.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "policy/fleet_controller.h"

namespace myriad::policy {

class ActionJournal {
 public:
  // Ids recorded before this leader's term (malformed ones are ignored).
  explicit ActionJournal(const std::vector<std::string>& recorded = {});

  // Whether `kind` changes the world and so is journaled.
  static bool Journaled(ActionKind kind);

  struct Entry {
    std::string id;
    bool taken = false;  // recorded before: skip it
  };
  // The id of the next action of `kind` on `target`, advancing the attempt count (and, after a
  // readmit or a cordon, the target's incarnation). The caller records a new id before acting.
  Entry Next(const std::string& target, ActionKind kind);

  int incarnation(const std::string& target) const;

 private:
  std::set<std::string> recorded_;
  std::map<std::string, int> incarnation_;
  std::map<std::pair<std::string, std::string>, int> attempts_;  // (target, kind): this incarnation's
};

}  // namespace myriad::policy
