// `myriad sim --report` and `--timeseries`: the HTML report opened in headless Chromium (no
// console errors, every chart line holds the CSV's data, a screenshot), byte-for-byte
// repeatable, and the flags' bad input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_myriad.h"
#include "../test_util/read_file.h"

namespace {

using myriad::test::ReadFile;

using myriad::testing::RunMyriad;
using myriad::testing::RunShell;
using myriad::testing::TestTempDir;

std::vector<std::string> SplitCsvLine(const std::string& line) {
  // The scenarios used here name nothing with a comma or a quote: no quoted fields.
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string field;
  while (std::getline(ss, field, ',')) out.push_back(field);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

struct Csv {
  std::map<std::string, size_t> column;
  std::vector<std::vector<std::string>> rows;
};

Csv ParseCsv(const std::string& text) {
  Csv csv;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  const auto header = SplitCsvLine(line);
  for (size_t i = 0; i < header.size(); ++i) csv.column[header[i]] = i;
  while (std::getline(in, line)) csv.rows.push_back(SplitCsvLine(line));
  return csv;
}

std::string Attr(const std::string& element, const std::string& name) {
  std::smatch m;
  const std::regex re(" " + name + "=\"([^\"]*)\"");
  return std::regex_search(element, m, re) ? m[1].str() : std::string("<missing>");
}

std::string Sim(const std::string& scenario) { return "sim " + std::string(MYRIAD_SOURCE_DIR) + "/scenarios/" + scenario; }

TEST(SimReport, OpensInHeadlessChromiumWithTheRunsDataAndNoConsoleErrors) {
  if (RunShell("command -v chromium").code != 0) {
    GTEST_SKIP() << "chromium not found (scripts/setup.sh installs it)";
  }
  const auto dir = TestTempDir() / "report";
  std::filesystem::create_directories(dir);
  const std::string html = (dir / "report.html").string(), csv_path = (dir / "series.csv").string();
  // Two policies overlaid: each chart has one line per policy and series.
  const auto run = RunMyriad(Sim("small.yaml") + " --quiet --compare least-loaded,kv-aware --sample-interval 15s" +
                                 " --report " + html + " --timeseries " + csv_path,
                             "", 120);
  ASSERT_EQ(run.code, 0) << run.out;
  const std::string page = ReadFile(html);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"));  // the SVG namespace, nothing fetched
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("<script src"), std::string::npos);

  const std::string shot = (dir / "report.png").string(), dom_path = (dir / "dom.html").string();
  const std::string err_path = (dir / "chromium.log").string();
  const auto browser = RunShell("timeout -s KILL 60 chromium --headless --disable-gpu --no-sandbox --user-data-dir=" +
                                (dir / "profile").string() + " --enable-logging=stderr --v=0 --window-size=1000,4000" +
                                " --screenshot=" + shot + " --dump-dom file://" + html + " > " + dom_path + " 2> " +
                                err_path);
  ASSERT_EQ(browser.code, 0) << browser.out << ReadFile(err_path);
  const std::string dom = ReadFile(dom_path), log = ReadFile(err_path);
  // Every console message (an uncaught exception included) is logged as CONSOLE; the page logs none.
  EXPECT_EQ(log.find(":CONSOLE"), std::string::npos) << log;
  // The script sets these on <body> when it has drawn everything (data-render-error if not).
  EXPECT_NE(dom.find("<body data-rendered=\"ok\" data-charts=\"12\">"), std::string::npos) << dom.substr(0, 2000);
  const std::string png = ReadFile(shot);
  ASSERT_GT(png.size(), 10000u);
  EXPECT_EQ(png.substr(1, 3), "PNG");

  const Csv csv = ParseCsv(ReadFile(csv_path));
  const size_t variant_col = csv.column.at("variant");
  std::map<std::string, size_t> rows_per_variant;
  for (const auto& row : csv.rows) ++rows_per_variant[row[variant_col]];
  ASSERT_EQ(rows_per_variant.size(), 2u);
  ASSERT_GT(rows_per_variant["kv-aware"], 10u);
  // Every line drawn: as many points as the CSV has windows for its policy, as many defined,
  // and the same largest value.
  const std::regex path_re("<path [^>]*class=\"series\"[^>]*>");
  std::map<std::string, int> lines_per_variant;
  int checked = 0;
  for (std::sregex_iterator it(dom.begin(), dom.end(), path_re), end; it != end; ++it) {
    const std::string el = it->str();
    const std::string key = Attr(el, "data-key"), variant = Attr(el, "data-variant");
    ASSERT_TRUE(csv.column.count(key)) << key;
    ++lines_per_variant[variant];
    const size_t col = csv.column.at(key);
    size_t points = 0, defined = 0;
    double max = 0;
    bool any = false;
    for (const auto& row : csv.rows) {
      if (row[variant_col] != variant) continue;
      ++points;
      if (col >= row.size() || row[col].empty()) continue;
      ++defined;
      const double v = std::strtod(row[col].c_str(), nullptr);
      if (!any || v > max) max = v;
      any = true;
    }
    EXPECT_EQ(Attr(el, "data-points"), std::to_string(points)) << key << " " << variant;
    EXPECT_EQ(Attr(el, "data-defined"), std::to_string(defined)) << key << " " << variant;
    if (any) {
      EXPECT_EQ(std::strtod(Attr(el, "data-max").c_str(), nullptr), max) << key << " " << variant;
    }
    ++checked;
  }
  // 12 charts: 25 lines per policy with the small scenario's two pools.
  EXPECT_EQ(lines_per_variant["least-loaded"], 25);
  EXPECT_EQ(lines_per_variant["kv-aware"], 25);
  EXPECT_EQ(checked, 50);
  // The summary table: one row per policy; no faults section, so no radar but a note.
  EXPECT_NE(dom.find("<tr data-variant=\"least-loaded\">"), std::string::npos);
  EXPECT_NE(dom.find("<tr data-variant=\"kv-aware\">"), std::string::npos);
  EXPECT_NE(dom.find("no straggler telemetry"), std::string::npos);
}

TEST(SimReport, FaultsAreMarkedAndTheRadarDrawn) {
  if (RunShell("command -v chromium").code != 0) {
    GTEST_SKIP() << "chromium not found (scripts/setup.sh installs it)";
  }
  const auto dir = TestTempDir() / "faults";
  std::filesystem::create_directories(dir);
  const std::string html = (dir / "report.html").string(), csv_path = (dir / "series.csv").string();
  const std::string json_path = (dir / "report.json").string();
  const auto run = RunMyriad(Sim("store_node_loss.yaml") + " --quiet --report " + html + " --timeseries " + csv_path +
                                 " -o " + json_path,
                             "", 120);
  ASSERT_EQ(run.code, 0) << run.out;
  const std::string dom_path = (dir / "dom.html").string(), err_path = (dir / "chromium.log").string();
  const auto browser = RunShell("timeout -s KILL 60 chromium --headless --disable-gpu --no-sandbox --user-data-dir=" +
                                (dir / "profile").string() + " --enable-logging=stderr --v=0 --screenshot=" +
                                (dir / "report.png").string() + " --dump-dom file://" + html + " > " + dom_path +
                                " 2> " + err_path);
  ASSERT_EQ(browser.code, 0) << browser.out;
  const std::string dom = ReadFile(dom_path), log = ReadFile(err_path);
  EXPECT_EQ(log.find(":CONSOLE"), std::string::npos) << log;
  EXPECT_NE(dom.find("data-rendered=\"ok\""), std::string::npos);
  // Each store node loss counted in the CSV is a marker on every one of the 12 time charts.
  const Csv csv = ParseCsv(ReadFile(csv_path));
  int64_t losses = 0;
  for (const auto& row : csv.rows) losses += std::stoll(row[csv.column.at("store_node_losses")]);
  ASSERT_GT(losses, 0);
  const std::regex loss_re("<line [^>]*data-kind=\"store_node_loss\"");
  const auto drawn = std::distance(std::sregex_iterator(dom.begin(), dom.end(), loss_re), std::sregex_iterator());
  EXPECT_EQ(drawn, 12 * losses);
  // The radar: one bar per ranked rank of the JSON report.
  const auto radar = nlohmann::json::parse(ReadFile(json_path))["failures"]["slow_node_radar"];
  ASSERT_FALSE(radar.empty());
  EXPECT_NE(dom.find("data-chart=\"radar\" data-variant=\"least-loaded\" data-points=\"" +
                     std::to_string(radar.size()) + "\""),
            std::string::npos);
  const std::regex bar_re("<rect [^>]*class=\"bar\"");
  EXPECT_EQ(std::distance(std::sregex_iterator(dom.begin(), dom.end(), bar_re), std::sregex_iterator()),
            static_cast<std::ptrdiff_t>(radar.size()));
}

TEST(SimReport, SameSeedSameBytes) {
  const auto dir = TestTempDir() / "repeat";
  std::filesystem::create_directories(dir);
  std::string files[2][2];
  for (int i = 0; i < 2; ++i) {
    const std::string n(1, static_cast<char>('0' + i));
    files[i][0] = (dir / ("r" + n + ".html")).string();
    files[i][1] = (dir / ("s" + n + ".csv")).string();
    const auto run = RunMyriad(Sim("small.yaml") + " --quiet --report " + files[i][0] + " --timeseries " + files[i][1],
                               "", 120);
    ASSERT_EQ(run.code, 0) << run.out;
  }
  EXPECT_EQ(ReadFile(files[0][0]), ReadFile(files[1][0]));
  EXPECT_EQ(ReadFile(files[0][1]), ReadFile(files[1][1]));
  EXPECT_GT(ReadFile(files[0][1]).size(), 1000u);
}

TEST(SimReport, BadIntervalIsBadInputAndAnUnwritablePathFailsBeforeTheRun) {
  for (const char* bad : {"0", "500us", "2000000s", "soon", "-5s"}) {
    const auto r = RunMyriad(Sim("small.yaml") + " --quiet --timeseries /dev/null --sample-interval=" + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--sample-interval"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("1ms to 1000000s"), std::string::npos) << r.out;
  }
  for (const char* flag : {"--report", "--timeseries"}) {
    const auto r = RunMyriad(Sim("small.yaml") + " --quiet " + flag + " /nonexistent-dir/out", "", 10);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find(std::string(flag) + ": cannot write /nonexistent-dir/out"), std::string::npos) << r.out;
  }
}

}  // namespace
