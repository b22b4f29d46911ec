#include "net/etcd_election.h"

#include "net/etcd_client.h"
#include "net/etcd_watch.h"

namespace myriad::net {

EtcdElection::EtcdElection(EtcdElectionOptions options, std::shared_ptr<Clock> clock, EtcdElectionHooks hooks)
    : o_(std::move(options)), clock_(OrDefaultClock(std::move(clock))), hooks_(std::move(hooks)),
      sleeper_(clock_->NewSleeper()) {}

EtcdElection::~EtcdElection() { Stop(true); }

void EtcdElection::Start() { thread_ = std::thread([this] { Loop(); }); }

void EtcdElection::Stop(bool resign) {
  std::lock_guard l(stop_mu_);
  if (!stop_.exchange(true)) resign_ = resign;
  fence_until_ = 0;
  sleeper_->Wake();
  if (thread_.joinable()) thread_.join();  // revokes the lease when resigning
}

bool EtcdElection::leading() const { return leading_.load() && clock_->Now() < fence_until_.load(); }

void EtcdElection::NapUntil(Nanos deadline) {
  if (!stop_.load()) sleeper_->SleepUntil(deadline);
}

void EtcdElection::Error(const std::string& error) {
  if (hooks_.on_error) hooks_.on_error(error);
}

void EtcdElection::StepDown(const std::string& why) {
  leading_ = false;
  fence_until_ = 0;
  if (hooks_.on_step_down) hooks_.on_step_down(why);
}

void EtcdElection::Loop() {
  std::unique_ptr<EtcdClient> etcd;
  // A follower's watch on the leader key, and the leader key (create revision) it watches.
  EtcdWatch watch;
  int64_t watched = 0;
  int64_t lease = 0;
  Nanos lease_until = 0;  // clock_'s time: the lease lives at least until then
  Nanos next_keepalive = 0;
  const Nanos ttl = o_.lease_ttl_seconds * kSecond;
  const std::string members = o_.key + "/members/";
  while (!stop_.load()) {
    Nanos now = clock_->Now();
    if (leading_.load() && now >= fence_until_.load()) {
      StepDown("the etcd lease may have expired: no keepalive was answered in time");
    }
    if (!etcd) {
      auto c = EtcdClient::Connect(o_.etcd, o_.etcd_timeout);
      if (!c.ok()) {
        Error(c.status().ToString());
        NapUntil(now + o_.poll_interval);
        continue;
      }
      etcd = std::move(*c);
    }
    if (lease == 0) {
      auto g = etcd->GrantLease(o_.lease_ttl_seconds);
      if (!g.ok()) {
        Error(g.status().ToString());
        NapUntil(now + o_.poll_interval);
        continue;
      }
      lease = *g;
      lease_until = now + ttl;
      next_keepalive = now + ttl / 3;
      if (absl::Status st = etcd->Put(members + o_.value, o_.value, lease); !st.ok()) Error(st.ToString());
    } else if (now >= next_keepalive) {
      auto k = etcd->KeepAlive(lease);
      if (k.ok()) {
        lease_until = now + *k * kSecond;  // `now` was taken before the request was sent
        next_keepalive = now + ttl / 3;
        if (leading_.load()) fence_until_ = lease_until - o_.fence_margin;
      } else if (k.status().code() == absl::StatusCode::kNotFound) {
        lease = 0;
        if (leading_.load()) StepDown("etcd reports the leader's lease expired");
        continue;
      } else {
        Error(k.status().ToString());
        next_keepalive = now + o_.poll_interval;  // retry sooner; the fence runs on
      }
    }
    if (!leading_.load() && !o_.campaign) {
      auto g = etcd->Get(o_.key);
      if (g.ok() && g->has_value() && hooks_.on_follow) hooks_.on_follow((*g)->value);
    } else if (!leading_.load()) {
      auto r = etcd->CreateIfAbsent(o_.key, o_.value, lease);
      if (!r.ok()) {
        Error(r.status().ToString());
      } else if (r->created ||
                 // Our own key, from before a step-down on a passing etcd error: lead again
                 // once a keepalive has renewed the lease (the fence is in the future).
                 (r->holder && r->holder->value == o_.value && r->holder->lease == lease &&
                  lease_until - o_.fence_margin > clock_->Now())) {
        const uint64_t term = static_cast<uint64_t>(r->created ? r->revision : r->holder->create_revision);
        std::vector<std::string> peers;
        if (auto m = etcd->GetPrefix(members); m.ok()) {
          for (const EtcdKv& kv : *m) {
            if (kv.value != o_.value) peers.push_back(kv.value);
          }
        }
        fence_until_ = lease_until - o_.fence_margin;
        watch.Stop();
        watched = 0;
        term_ = term;
        if (hooks_.on_elected) hooks_.on_elected(term, peers);
        leading_ = true;
      } else if (r->holder) {
        if (hooks_.on_follow) hooks_.on_follow(r->holder->value);
        if (!watch.active() || watched != r->holder->create_revision) {
          absl::Status st = watch.Start(o_.etcd, o_.key, r->holder->mod_revision + 1,
                                        EtcdWatchCallbacks{.on_event = [this](const EtcdWatchEvent&) { sleeper_->Wake(); },
                                                           .on_end = [this](absl::Status) { sleeper_->Wake(); }},
                                        o_.etcd_timeout);
          watched = st.ok() ? r->holder->create_revision : 0;
        }
      }
    } else if (now + o_.poll_interval >= next_keepalive) {
      // Once per keepalive round: is the key still ours?
      auto g = etcd->Get(o_.key);
      if (g.ok() && (!g->has_value() || (*g)->value != o_.value ||
                     static_cast<uint64_t>((*g)->create_revision) != term_.load())) {
        StepDown("the leader key is gone or belongs to another member");
      }
    }
    // A follower watching the key sleeps until it changes or a keepalive is due.
    // Deadlines from the round's start: a clock that jumped meanwhile brings the next round at once.
    NapUntil(!leading_.load() && watch.active() ? next_keepalive : now + o_.poll_interval);
  }
  watch.Stop();
  leading_ = false;
  fence_until_ = 0;
  if (resign_.load() && lease != 0 && etcd) {
    // Revoking deletes the leader key bound to the lease: a follower wins at its next look.
    (void)etcd->Revoke(lease);
  }
}

}  // namespace myriad::net
