#pragma once
// What `myriad diagnose` reads, turned into policy::DiagnoseInput: a simulation's JSON results
// (`myriad sim -o` or `--json`), live Prometheus expositions (engines, the gateway, the
// controller), or a Prometheus server's current samples of those families.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/diagnose.h"

namespace myriad::cli {

// Errors (InvalidArgument) name the file, and the line of a JSON syntax error or the field of
// a wrong type. Fields the results lack stay unknown.
absl::StatusOr<policy::DiagnoseInput> ReadSimulationResults(const std::string& path);

// One exposition per source: `source` names the units it holds ("engine <source>").
struct Exposition {
  std::string source;
  std::string text;
};
policy::DiagnoseInput FromExpositions(const std::vector<Exposition>& expositions);

// GET of a /metrics URL ("http://host:port/metrics"; "http://host:port" means /metrics).
// InvalidArgument for a malformed URL; Unavailable (naming the URL) when the scrape fails.
absl::StatusOr<Exposition> Scrape(const std::string& url);
// A Prometheus server's latest samples of the vllm: and myriad_ families, one exposition per
// scraped instance, through its HTTP API (/api/v1/query).
absl::StatusOr<std::vector<Exposition>> QueryPrometheus(const std::string& url);

}  // namespace myriad::cli
