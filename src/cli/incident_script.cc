#include "cli/incident_script.h"

#include <fmt/format.h>

#include <filesystem>

#include "control/config.h"
#include "core/config_file.h"
#include "core/yaml_reader.h"

namespace myriad::cli {

namespace {

using sim::IncidentFaultKind;

absl::Status Within(const YamlReader& r, const YAML::Node& map, const char* key, const std::string& path, bool ok,
                    const std::string& bound) {
  return r.Check(map, key, path, ok, "must be in " + bound, map[key] ? map[key].Scalar() : "");
}

absl::Status ReadFault(const YamlReader& r, const YAML::Node& n, const std::string& path, const IncidentScript& s,
                       sim::IncidentFault* f) {
  MYRIAD_RETURN_IF_ERROR(r.Map(n, path, {"at", "engine", "fault", "rank", "factor"}));
  for (const char* key : {"at", "engine", "fault"}) {
    if (!n[key]) return r.Error(n, YamlReader::Join(path, key), "required");
  }
  const sim::FleetIncident& inc = s.incident;
  MYRIAD_RETURN_IF_ERROR(r.Duration(n, "at", path, &f->at));
  MYRIAD_RETURN_IF_ERROR(Within(r, n, "at", path, f->at >= 0 && f->at <= inc.duration, "[0s, duration]"));
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "engine", path, &f->engine));
  MYRIAD_RETURN_IF_ERROR(
      Within(r, n, "engine", path, f->engine >= 0 && f->engine < inc.engines, fmt::format("[0, {})", inc.engines)));
  std::string kind;
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "fault", path, &kind));
  if (kind == "crash") f->kind = IncidentFaultKind::kCrash;
  else if (kind == "hang") f->kind = IncidentFaultKind::kHang;
  else if (kind == "slow") f->kind = IncidentFaultKind::kSlow;
  else if (kind == "wrong_answer") f->kind = IncidentFaultKind::kWrongAnswer;
  else return r.Error(n["fault"], path + ".fault", fmt::format("'{}' is not crash, hang, slow or wrong_answer", kind));
  const bool slow = f->kind == IncidentFaultKind::kSlow;
  for (const char* key : {"rank", "factor"}) {
    if (slow && !n[key]) return r.Error(n, YamlReader::Join(path, key), "required for a slow fault");
    if (!slow && n[key]) return r.Error(n[key], YamlReader::Join(path, key), "only a slow fault has it");
  }
  if (!slow) return absl::OkStatus();
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "rank", path, &f->rank));
  MYRIAD_RETURN_IF_ERROR(
      Within(r, n, "rank", path, f->rank >= 0 && f->rank < inc.ranks, fmt::format("[0, dp) = [0, {})", inc.ranks)));
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "factor", path, &f->factor));
  return Within(r, n, "factor", path, f->factor > 1 && f->factor <= kMaxSlowFactor,
                fmt::format("(1, {}]", kMaxSlowFactor));
}

std::string_view FaultName(IncidentFaultKind k) {
  switch (k) {
    case IncidentFaultKind::kCrash: return "crash";
    case IncidentFaultKind::kHang: return "hang";
    case IncidentFaultKind::kSlow: return "slow";
    case IncidentFaultKind::kWrongAnswer: return "wrong_answer";
  }
  return "";
}

}  // namespace

absl::StatusOr<IncidentScript> LoadIncidentScript(const std::string& path) {
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  YamlReader r{path};
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", path, e.mark.line + 1, e.msg));
  }
  if (!root || !root.IsMap()) return r.Error(root, "", "expected a mapping (engines, load, faults, ...)");
  MYRIAD_RETURN_IF_ERROR(r.UniqueKeys(root));
  MYRIAD_RETURN_IF_ERROR(
      r.Map(root, "", {"engines", "dp", "speed", "duration", "drain", "seed", "load", "control", "restart_time", "faults"}));
  IncidentScript s;
  s.path = path;
  sim::FleetIncident& inc = s.incident;
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "engines", "", &inc.engines));
  MYRIAD_RETURN_IF_ERROR(Within(r, root, "engines", "", inc.engines >= 1 && inc.engines <= kMaxIncidentEngines,
                                fmt::format("[1, {}]", kMaxIncidentEngines)));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "dp", "", &inc.ranks));
  MYRIAD_RETURN_IF_ERROR(Within(r, root, "dp", "", inc.ranks >= 1 && inc.ranks <= kMaxIncidentRanks,
                                fmt::format("[1, {}]", kMaxIncidentRanks)));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "speed", "", &s.speed));
  MYRIAD_RETURN_IF_ERROR(Within(r, root, "speed", "", s.speed >= 1e-3 && s.speed <= 1e6, "[0.001, 1000000]"));
  MYRIAD_RETURN_IF_ERROR(r.Duration(root, "duration", "", &inc.duration));
  MYRIAD_RETURN_IF_ERROR(Within(r, root, "duration", "", inc.duration >= kSecond && inc.duration <= kMaxIncidentDuration,
                                "[1s, 1h]"));
  MYRIAD_RETURN_IF_ERROR(r.Duration(root, "drain", "", &inc.drain));
  MYRIAD_RETURN_IF_ERROR(Within(r, root, "drain", "", inc.drain >= 0 && inc.drain <= kMaxIncidentDuration, "[0s, 1h]"));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "seed", "", &inc.seed));
  MYRIAD_RETURN_IF_ERROR(r.Duration(root, "restart_time", "", &inc.driver.restart_time));
  MYRIAD_RETURN_IF_ERROR(Within(r, root, "restart_time", "",
                                inc.driver.restart_time >= 0 && inc.driver.restart_time <= kMaxRestartTime, "[0s, 10m]"));
  if (const YAML::Node l = root["load"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(l, "load", {"rate", "concurrency", "prompt_tokens", "max_tokens"}));
    MYRIAD_RETURN_IF_ERROR(r.Get(l, "rate", "load", &inc.rate));
    MYRIAD_RETURN_IF_ERROR(Within(r, l, "rate", "load", inc.rate > 0 && inc.rate <= kMaxIncidentRate,
                                  fmt::format("(0, {}] requests/s", kMaxIncidentRate)));
    MYRIAD_RETURN_IF_ERROR(r.Get(l, "concurrency", "load", &s.concurrency));
    MYRIAD_RETURN_IF_ERROR(Within(r, l, "concurrency", "load",
                                  s.concurrency >= 1 && s.concurrency <= kMaxIncidentConcurrency,
                                  fmt::format("[1, {}]", kMaxIncidentConcurrency)));
    for (auto [key, out] : {std::pair{"prompt_tokens", &inc.prompt_tokens}, {"max_tokens", &inc.max_tokens}}) {
      MYRIAD_RETURN_IF_ERROR(r.Get(l, key, "load", out));
      MYRIAD_RETURN_IF_ERROR(
          Within(r, l, key, "load", *out >= 1 && *out <= kMaxIncidentTokens, fmt::format("[1, {}]", kMaxIncidentTokens)));
    }
  }
  control::ControlConfig cc;
  if (root["control"]) {
    std::string file;
    MYRIAD_RETURN_IF_ERROR(r.Get(root, "control", "", &file));
    const std::filesystem::path p(file);
    s.control_config = p.is_absolute() ? file : (std::filesystem::path(path).parent_path() / p).string();
    auto loaded = control::LoadControlConfig(s.control_config, /*fleet_given=*/true);
    if (!loaded.ok()) return loaded.status();
    cc = *std::move(loaded);
  }
  inc.driver.policy = cc.policy;
  inc.driver.scrape_interval = cc.scrape_interval;
  if (const YAML::Node fs = root["faults"]) {
    if (!fs.IsSequence()) return r.Error(fs, "faults", "expected a list");
    if (fs.size() > kMaxIncidentFaults) {
      return r.Error(fs, "faults", fmt::format("at most {} faults", kMaxIncidentFaults));
    }
    for (size_t i = 0; i < fs.size(); ++i) {
      sim::IncidentFault f;
      MYRIAD_RETURN_IF_ERROR(ReadFault(r, fs[i], fmt::format("faults[{}]", i), s, &f));
      inc.faults.push_back(f);
    }
  }
  return s;
}

nlohmann::ordered_json IncidentPlan(const IncidentScript& s) {
  const sim::FleetIncident& inc = s.incident;
  nlohmann::ordered_json faults = nlohmann::ordered_json::array();
  for (const sim::IncidentFault& f : inc.faults) {
    nlohmann::ordered_json j = {{"at_s", NanosToSeconds(f.at)}, {"engine", fmt::format("engine-{}", f.engine)},
                                {"fault", FaultName(f.kind)}};
    if (f.kind == IncidentFaultKind::kSlow) {
      j["rank"] = f.rank;
      j["factor"] = f.factor;
    }
    faults.push_back(std::move(j));
  }
  return {{"engines", inc.engines},
          {"dp", inc.ranks},
          {"speed", s.speed},
          {"duration_s", NanosToSeconds(inc.duration)},
          {"drain_s", NanosToSeconds(inc.drain)},
          {"load", {{"rate", inc.rate}, {"concurrency", s.concurrency}, {"prompt_tokens", inc.prompt_tokens},
                    {"max_tokens", inc.max_tokens}, {"seed", inc.seed}}},
          {"control_config", s.control_config},
          {"scrape_interval_s", NanosToSeconds(inc.driver.scrape_interval)},
          {"faults", std::move(faults)}};
}

}  // namespace myriad::cli
