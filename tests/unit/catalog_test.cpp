#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "harness/catalog.h"

using namespace cudatrace;

// workloads/workloads.def is read by the build and compiled into the catalog: every build
// the catalog names exists, and every workload build there is one the catalog names.
TEST(Catalog, CatalogAndBuildAreOneList) {
  const std::filesystem::path dir = CUDATRACE_WORKLOAD_DIR;
  std::set<std::string> named;
  for (const auto& w : workloads())
    for (const auto& linkage : w.linkages) {
      named.insert(w.name + "." + linkage);
      EXPECT_TRUE(std::filesystem::exists(dir / (w.name + "." + linkage))) << w.name << "." << linkage;
    }
  // The benchmark's binaries sit there too: it is not a workload.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename();
    const auto dot = file.rfind('.');
    if (!entry.is_regular_file() || dot == std::string::npos) continue;
    const std::string ext = file.substr(dot + 1), stem = file.substr(0, dot);
    if ((ext != "static" && ext != "shared") || stem == "percall") continue;
    EXPECT_TRUE(named.count(file)) << file << " is built but not in the catalog";
  }
  EXPECT_GE(named.size(), 2u);
}

TEST(Catalog, WordsOfTheListMeanWhatTheyDid) {
  const WorkloadInfo* errors = find_workload("errors");
  ASSERT_NE(errors, nullptr);
  EXPECT_FALSE(errors->needs_gpu);
  const WorkloadInfo* dlopen = find_workload("dlopen");
  ASSERT_NE(dlopen, nullptr);
  EXPECT_EQ(dlopen->linkages, std::vector<std::string>{"shared"});
  EXPECT_TRUE(find_workload("driverapi")->needs_libcuda);
  EXPECT_TRUE(find_workload("vecadd")->needs_gpu);
}
