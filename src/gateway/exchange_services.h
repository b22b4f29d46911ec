#pragma once
// What one exchange (a client request on its way through the gateway) needs of the gateway, and
// nothing more: admission and routing, the load and health it puts on backends, the upstream
// client, and the counters and access log it feeds. The gateway implements it; an exchange
// never sees the gateway's state or lock, so each side's responsibilities stay its own.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "gateway/backends.h"
#include "gateway/config.h"
#include "gateway/request_metrics.h"
#include "net/async_http_client.h"
#include "policy/backend_cost_model.h"

namespace myriad::gateway {

struct Exchange;

// Admission's answer for one attempt: the chosen entry (and decode) backends, or a rejection.
struct Route {
  std::shared_ptr<Backend> entry, decode;
  int entry_rank = -1, decode_rank = -1;  // DP ranks steered by header; -1: the engine's pick
  bool rejected = false;
  bool no_backend = false;  // rejected because no backend is left to try (503, not 429)
  std::string reason;
  int64_t cached_tokens = 0;
  int64_t queued_tokens = 0;  // prompt tokens queued on the entry before this request
  double estimated_ttft_s = 0;
  // What the first token teaches the entry's learned cost model (policy::DispatchSample).
  policy::CostSample cost_sample;
  // For the routing span (filled when tracing is on): the prompt tokens expected from the
  // store tier (part of cached_tokens), the candidates weighed, and the policy's name.
  int64_t store_tokens = 0;
  int candidates = 0;
  std::string policy;
};

class ExchangeServices {
 public:
  using Target = std::pair<std::shared_ptr<Backend>, int>;  // a backend and its DP rank (-1: none)

  virtual ~ExchangeServices() = default;

  virtual const GatewayConfig& config() const = 0;
  virtual bool shutting_down() const = 0;

  // Routing. Admits and routes the exchange's next attempt (a retry after its first), charging
  // the chosen entry with the request and its uncached prompt.
  virtual Route Pick(const Exchange& ex) = 0;
  // P/D: the decode engine for an exchange whose prefill is done, chosen from the decode
  // engines' loads at that moment, as the simulator chooses at hand-off ({null, -1}: none left).
  virtual Target PickDecodeAfterPrefill(const Exchange& ex) = 0;
  // P/D: the request moves to its decode engine, which is charged with it and its KV (prompt +
  // output tokens, policy/decode_load.h).
  virtual void HandOff(const Target& decode, int64_t kv_tokens) = 0;

  // Load and health. The first token came: the prompt is computed, so its tokens leave the
  // backend's prefill queue now rather than when the whole answer ends (the simulated unit's
  // load drops as it computes; one load signal in both worlds), and `sample` (null: none)
  // teaches the backend's learned cost model, both in one step.
  virtual void FirstToken(const Target& b, int64_t queued_tokens, const policy::CostSample* sample) = 0;
  // A call ended: its request and remaining prefill charge (and a decode call's hand-off charge
  // of `decode_kv_tokens`, 0: none) leave the backend, and its outcome counts toward passive
  // ejection.
  virtual void Finished(const Target& b, bool ok, int64_t queued_tokens, int64_t decode_kv_tokens) = 0;
  // Takes one retry from the budget (and counts it); false when the budget is spent.
  virtual bool SpendRetry() = 0;

  virtual std::shared_ptr<net::Call> StartUpstream(net::CallRequest request, net::CallCallbacks callbacks) = 0;

  // Observability.
  virtual void CountRejected() = 0;
  virtual void CountSlowClient() = 0;
  // A finished exchange: its status by route, and its metrics.
  virtual void Record(bool chat, int status, const RequestOutcome& outcome) = 0;
  virtual bool LogEnabled() = 0;
  virtual void Log(const std::string& line) = 0;
};

}  // namespace myriad::gateway
