#pragma once
// One call from a scenario to its results: builds the workload the scenario names, the
// cluster, runs it and returns the report.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "sim/cluster.h"
#include "sim/scenario.h"

namespace myriad::sim {

absl::StatusOr<std::unique_ptr<Workload>> MakeWorkload(const Scenario& s);

// `outcomes`, when set, gets every request's end as the run goes (myriad sim --request-log);
// `series`, when set, gets the run sampled every `sample_interval` of virtual time (--report).
absl::StatusOr<nlohmann::ordered_json> RunScenario(const Scenario& s, const ProgressFn& progress = nullptr,
                                                   OutcomeSink outcomes = nullptr, TimeSeries* series = nullptr,
                                                   Nanos sample_interval = kDefaultSampleInterval);

// The terminal summary of a report.
std::string FormatSummary(const nlohmann::ordered_json& report);

}  // namespace myriad::sim
