// The Grafana dashboards in dashboards/: shaped as Grafana imports them, and every panel's query
// answered with series by a real Prometheus (Debian's) scraping a `myriad up` (gateway and
// emulated engines), a DP engine watched by `myriad control`, and a KV store master, after a
// little load.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../test_util/child_process.h"
#include "../test_util/etcd_process.h"
#include "../test_util/temp_dir.h"
#include "run_myriad.h"
#include "net/http_client.h"

namespace myriad {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::vector<std::string> kDashboards = {"gateway", "engines", "store", "controller"};

json LoadDashboard(const std::string& name) {
  std::ifstream in(std::string(MYRIAD_SOURCE_DIR) + "/dashboards/" + name + ".json");
  return json::parse(in, nullptr, false);
}

// What Grafana's import needs of a dashboard, and what our panels promise: a datasource
// variable every panel's queries go through, and a PromQL expr per target.
std::vector<std::string> ShapeProblems(const std::string& name, const json& d) {
  std::vector<std::string> bad;
  auto fail = [&](const std::string& what) { bad.push_back(name + ": " + what); };
  if (!d.is_object()) return {name + ": not a JSON object"};
  if (!d.value("title", json()).is_string() || d["title"].get<std::string>().empty()) fail("no title");
  if (!d.value("uid", json()).is_string() || d["uid"].get<std::string>().empty() ||
      d["uid"].get<std::string>().size() > 40) {
    fail("uid missing or over Grafana's 40 characters");
  }
  if (!d.value("schemaVersion", json()).is_number_integer() || d["schemaVersion"].get<int>() < 30) {
    fail("schemaVersion missing or older than Grafana 8's");
  }
  std::string ds_var;
  for (const json& v : d.value("templating", json::object()).value("list", json::array())) {
    if (v.value("type", "") == "datasource" && v.value("query", "") == "prometheus") ds_var = v.value("name", "");
  }
  if (ds_var.empty()) fail("no Prometheus datasource variable in templating.list");
  const json panels = d.value("panels", json());
  if (!panels.is_array() || panels.empty()) {
    fail("no panels");
    return bad;
  }
  std::set<int> ids;
  for (const json& p : panels) {
    const std::string title = p.value("title", "");
    const std::string where = fmt::format("panel '{}'", title);
    if (title.empty()) fail("a panel without a title");
    if (!p.value("id", json()).is_number_integer() || !ids.insert(p["id"].get<int>()).second) {
      fail(where + ": id missing or repeated");
    }
    const json g = p.value("gridPos", json());
    if (!g.is_object() || !g.value("w", json()).is_number_integer() || !g.value("h", json()).is_number_integer() ||
        !g.value("x", json()).is_number_integer() || !g.value("y", json()).is_number_integer() ||
        g["x"].get<int>() + g["w"].get<int>() > 24) {
      fail(where + ": gridPos needs integer x, y, w, h within 24 columns");
    }
    const std::string type = p.value("type", "");
    if (type == "text") {
      if (p.value("options", json::object()).value("content", "").empty()) fail(where + ": text without content");
      continue;
    }
    if (!std::set<std::string>{"timeseries", "bargauge", "table", "stat", "gauge"}.count(type)) {
      fail(where + ": unknown panel type '" + type + "'");
    }
    if (p.value("datasource", json::object()).value("uid", "") != "${" + ds_var + "}") {
      fail(where + ": datasource is not the ${" + ds_var + "} variable");
    }
    const json targets = p.value("targets", json());
    if (!targets.is_array() || targets.empty()) fail(where + ": no targets");
    std::set<std::string> refs;
    for (const json& t : targets.is_array() ? targets : json::array()) {
      if (!t.value("expr", json()).is_string() || t["expr"].get<std::string>().empty()) fail(where + ": a target without expr");
      if (!refs.insert(t.value("refId", "")).second || t.value("refId", "").empty()) {
        fail(where + ": refId missing or repeated");
      }
    }
  }
  return bad;
}

TEST(Dashboards, ImportableByGrafanaWithADatasourceVariableAndAnExprPerTarget) {
  for (const std::string& name : kDashboards) {
    const json d = LoadDashboard(name);
    const auto problems = ShapeProblems(name, d);
    EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  }
  // The check itself catches a broken dashboard.
  json broken = LoadDashboard("gateway");
  broken["panels"][0]["targets"][0].erase("expr");
  broken["panels"][1]["datasource"]["uid"] = "some-fixed-uid";
  EXPECT_EQ(ShapeProblems("broken", broken).size(), 2u);
}

// A child process with stdout and stderr in a file, killed when the test ends.
class Child {
 public:
  Child(std::vector<std::string> args, std::string log) : log_(log), process_(std::move(args), log) {}
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The first match of `re`'s group 1 in the output, waited for (up to 15 s).
  std::string WaitFor(const std::string& re) const {
    const std::regex r(re);
    for (int i = 0; i < 1500; ++i) {
      std::smatch m;
      const std::string log = Log();
      if (std::regex_search(log, m, r)) return m[1];
      std::this_thread::sleep_for(10ms);
    }
    return "";
  }

 private:
  std::string log_;
  myriad::test::ChildProcess process_;
};

std::string Encode(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

json Query(net::HttpClient& prom, const std::string& expr) {
  auto r = prom.Get("/api/v1/query?query=" + Encode(expr));
  if (!r.ok() || r->status != 200) return json{{"error", r.ok() ? r->body : std::string(r.status().message())}};
  return json::parse(r->body, nullptr, false);
}

TEST(Dashboards, EveryPanelQueryReturnsSeriesFromARealPrometheusScrapingMyriadUp) {
  if (std::system("command -v prometheus >/dev/null 2>&1") != 0) {
    FAIL() << "prometheus is not installed: scripts/setup.sh installs it (Debian package prometheus)";
  }
  const auto started = std::chrono::steady_clock::now();
  const std::filesystem::path dir = testing::TestTempDir() / "dashboards";
  std::filesystem::create_directories(dir / "prom");
  const std::string bin = MYRIAD_BINARY;
  Child up({bin, "up", "--port", "0", "--engines", "2", "--speed", "50"}, (dir / "up.log").string());
  Child dp({bin, "emu", "--listen", "127.0.0.1:0", "--dp", "4", "--speed", "50"}, (dir / "emu.log").string());
  Child master({bin, "kvstore", "master", "--listen", "127.0.0.1:0"}, (dir / "master.log").string());
  const std::string gw_port = up.WaitFor(R"(gateway on http://127\.0\.0\.1:(\d+))");
  const std::string dp_port = dp.WaitFor(R"(on http://127\.0\.0\.1:(\d+))");
  const std::string master_port = master.WaitFor(R"(listening on http://127\.0\.0\.1:(\d+))");
  ASSERT_FALSE(gw_port.empty()) << up.Log();
  ASSERT_FALSE(dp_port.empty()) << dp.Log();
  ASSERT_FALSE(master_port.empty()) << master.Log();
  std::vector<std::string> engines;
  {
    const std::string log = up.Log();
    const std::regex r(R"((127\.0\.0\.1:\d+)  kv events)");
    for (auto it = std::sregex_iterator(log.begin(), log.end(), r); it != std::sregex_iterator(); ++it) {
      engines.push_back((*it)[1]);
    }
  }
  ASSERT_EQ(engines.size(), 2u) << up.Log();
  const uint16_t ctl_port = test::FreePort(), prom_port = test::FreePort();
  std::ofstream(dir / "control.yaml") << fmt::format(
      "listen: 127.0.0.1:{}\nscrape: {{interval: 200ms, timeout: 1s}}\n"
      "engines:\n  - {{name: dp4, url: \"http://127.0.0.1:{}\"}}\nactuators: {{gateway: false}}\ndry_run: true\n",
      ctl_port, dp_port);
  Child control({bin, "control", "--config", (dir / "control.yaml").string()}, (dir / "control.log").string());
  std::ofstream(dir / "prometheus.yml") << fmt::format(
      "global: {{scrape_interval: 1s, scrape_timeout: 900ms}}\n"
      "scrape_configs:\n"
      "  - {{job_name: gateway, static_configs: [{{targets: ['127.0.0.1:{}']}}]}}\n"
      "  - {{job_name: engines, static_configs: [{{targets: ['{}', '{}', '127.0.0.1:{}']}}]}}\n"
      "  - {{job_name: controller, static_configs: [{{targets: ['127.0.0.1:{}']}}]}}\n"
      "  - {{job_name: store, static_configs: [{{targets: ['127.0.0.1:{}']}}]}}\n",
      gw_port, engines[0], engines[1], dp_port, ctl_port, master_port);
  Child prometheus({"prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
                    "--storage.tsdb.path=" + (dir / "prom").string(),
                    fmt::format("--web.listen-address=127.0.0.1:{}", prom_port), "--log.level=warn"},
                   (dir / "prometheus.log").string());
  net::HttpClient prom(net::HostPort{"127.0.0.1", prom_port}, net::HttpClientOptions{.timeout = 5 * kSecond});
  // Every target scraped at least twice before the load, so rates span it.
  auto all_up = [&](int scrapes) {
    const json r = Query(prom, "count_over_time(up[1m]) >= " + std::to_string(scrapes) + " and up == 1");
    return r.is_object() && r.value("status", "") == "success" && r["data"]["result"].size() == 6;
  };
  ASSERT_TRUE(test::WaitUntil([&] { return all_up(2); }, 20000ms))
      << prometheus.Log() << "\n" << Query(prom, "up").dump() << "\n" << control.Log();

  net::HttpClient gw(net::HostPort{"127.0.0.1", static_cast<uint16_t>(std::stoi(gw_port))});
  for (int i = 0; i < 8; ++i) {
    const std::string body = json({{"model", "emu-model"}, {"prompt", fmt::format("hello dashboards {} {}", i % 2, i)},
                                   {"max_tokens", 8}, {"stream", true}})
                                 .dump();
    auto r = gw.Post("/v1/completions", body);
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : std::string(r.status().message()));
  }
  auto refused = gw.Post("/v1/completions", json({{"model", "no-such-model"}, {"prompt", "x"}}).dump());
  ASSERT_TRUE(refused.ok() && refused->status == 404);
  net::HttpClient emu(net::HostPort{"127.0.0.1", static_cast<uint16_t>(std::stoi(dp_port))});
  for (int i = 0; i < 8; ++i) {
    auto r = emu.Request("POST", "/v1/completions",
                         json({{"prompt", fmt::format("rank load {}", i)}, {"max_tokens", 8}, {"stream", true}}).dump(),
                         "application/json", {{"X-data-parallel-rank", std::to_string(i % 4)}});
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : std::string(r.status().message()));
  }
  // A refused store call, so the store's error counter has a series.
  net::HttpClient store(net::HostPort{"127.0.0.1", static_cast<uint16_t>(std::stoi(master_port))});
  auto bad = store.Post("/v1/get", "not json");
  ASSERT_TRUE(bad.ok() && bad->status == 400);
  std::this_thread::sleep_for(3500ms);  // three more scrapes after the load

  std::vector<std::string> empty;
  int queries = 0;
  for (const std::string& name : kDashboards) {
    const json d = LoadDashboard(name);
    for (const json& p : d["panels"]) {
      for (const json& t : p.value("targets", json::array())) {
        std::string expr = t["expr"];
        // Grafana's own variable: at least four scrape intervals, as Grafana computes it.
        for (size_t at; (at = expr.find("$__rate_interval")) != std::string::npos;) expr.replace(at, 16, "1m");
        const json r = Query(prom, expr);
        ++queries;
        if (!r.is_object() || r.value("status", "") != "success" || r["data"]["result"].empty()) {
          empty.push_back(fmt::format("dashboard {} panel '{}' expr {}: {}", name, p["title"].get<std::string>(),
                                      expr, r.dump()));
        }
      }
    }
  }
  EXPECT_GE(queries, 30);

  // The same Prometheus read by `myriad diagnose --prometheus`: the refused request is found.
  const testing::CommandResult d =
      testing::RunMyriad(fmt::format("diagnose --json --prometheus http://127.0.0.1:{}", prom_port), "", 60);
  ASSERT_EQ(d.code, 0) << d.out;
  const json findings = json::parse(d.out, nullptr, false).value("findings", json::array());
  bool refused_found = false;
  for (const json& f : findings) {
    refused_found = refused_found || (f["suspicion"] == "admission" &&
                                      f["evidence"].get<std::string>().find("unknown_model 1") != std::string::npos);
  }
  EXPECT_TRUE(refused_found) << d.out;
  EXPECT_TRUE(empty.empty()) << ::testing::PrintToString(empty);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 60s);
}

}  // namespace
}  // namespace myriad
