// The end-of-run table (harness/out/summary.h): one row per method from a recorded matrix's
// summary.json, the untraced baseline left out, and short enough to read on one screen.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "harness/out/summary.h"

using json = nlohmann::json;

TEST(MethodTable, OneRowPerMethodFromARecordedMatrix) {
  std::ifstream f(std::string(CUDATRACE_FIXTURES) + "/results-h100/matrix/summary.json");
  ASSERT_TRUE(f) << "fixture missing";
  const json summary = json::parse(f);
  const std::string table = cudatrace::method_table(summary);
  std::vector<std::string> lines;
  std::istringstream in(table);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  // A header, one row for each of the five methods the matrix ran, the legend.
  ASSERT_EQ(lines.size(), 7u) << table;
  EXPECT_NE(lines[0].find("method"), std::string::npos) << table;
  EXPECT_NE(lines[0].find("workloads"), std::string::npos) << table;
  EXPECT_NE(lines[0].find("lost events"), std::string::npos) << table;
  std::vector<std::string> methods;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    std::istringstream w(lines[i]);
    std::string m;
    w >> m;
    methods.push_back(m);
    EXPECT_LE(lines[i].size(), 160u) << lines[i];
  }
  // The recorded combinations' methods, the untraced baseline left out, in the order they ran.
  std::vector<std::string> ran;
  for (const auto& c : summary["combos"])
    if (const std::string m = c["method"]; m != "none" && std::find(ran.begin(), ran.end(), m) == ran.end()) ran.push_back(m);
  EXPECT_EQ(methods, ran) << table;
  EXPECT_EQ(cudatrace::method_table(json{{"combos", json::array()}}), "") << "no method, no table";
}
