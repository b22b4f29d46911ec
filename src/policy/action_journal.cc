#include "policy/action_journal.h"

#include <algorithm>
#include <charconv>

namespace myriad::policy {

namespace {

bool ClosesIncident(std::string_view kind) { return kind == "readmit" || kind == "cordon"; }

bool ParseInt(std::string_view s, int* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size() && *out >= 0;
}

}  // namespace

bool ActionJournal::Journaled(ActionKind kind) {
  return kind == ActionKind::kDrain || kind == ActionKind::kRestart || kind == ActionKind::kReadmit ||
         kind == ActionKind::kCordon || kind == ActionKind::kChangeRole;
}

ActionJournal::ActionJournal(const std::vector<std::string>& recorded) {
  for (const std::string& id : recorded) {
    // From the right: a target's name may itself hold '/'.
    const size_t a = id.rfind('/');
    if (a == std::string::npos || a == 0) continue;
    const size_t k = id.rfind('/', a - 1);
    if (k == std::string::npos || k == 0) continue;
    const size_t i = id.rfind('/', k - 1);
    if (i == std::string::npos || i == 0) continue;
    int inc = 0, attempt = 0;
    if (!ParseInt(std::string_view(id).substr(i + 1, k - i - 1), &inc) ||
        !ParseInt(std::string_view(id).substr(a + 1), &attempt)) {
      continue;
    }
    recorded_.insert(id);
    const std::string target = id.substr(0, i);
    if (ClosesIncident(std::string_view(id).substr(k + 1, a - k - 1))) {
      incarnation_[target] = std::max(incarnation_[target], inc + 1);
    }
  }
}

int ActionJournal::incarnation(const std::string& target) const {
  const auto it = incarnation_.find(target);
  return it == incarnation_.end() ? 0 : it->second;
}

ActionJournal::Entry ActionJournal::Next(const std::string& target, ActionKind kind) {
  const std::string name(ActionName(kind));
  const int inc = incarnation(target);
  const int attempt = ++attempts_[{target, name}];
  Entry e;
  e.id = target + "/" + std::to_string(inc) + "/" + name + "/" + std::to_string(attempt);
  e.taken = !recorded_.insert(e.id).second;
  if (ClosesIncident(name)) {
    incarnation_[target] = inc + 1;
    for (auto it = attempts_.begin(); it != attempts_.end();) {
      it = it->first.first == target ? attempts_.erase(it) : std::next(it);
    }
  }
  return e;
}

}  // namespace myriad::policy
