#include <gtest/gtest.h>

#include "workloads/workload.h"

using namespace allocmark::workloads;

TEST(Registry, EveryWorkloadHasPhasesParamsAndASeed) {
  ASSERT_NE(find_workload("size_mix"), nullptr);
  ASSERT_NE(find_workload("fault_inject"), nullptr);
  EXPECT_TRUE(find_workload("fault_inject")->diagnostic);
  for (const auto& w : registered_workloads()) {
    EXPECT_FALSE(w.phases.empty()) << w.name;
    bool has_seed = false;
    for (const auto& p : w.params) {
      has_seed |= p.name == "seed";
      EXPECT_EQ(check_param_value(p, p.quick), "") << w.name << "." << p.name;
      EXPECT_EQ(check_param_value(p, p.full), "") << w.name << "." << p.name;
    }
    EXPECT_TRUE(has_seed) << w.name;
    // `run`'s estimate of a matrix reads each workload's typical cell time at both sizes.
    if (!w.diagnostic && !w.named_only) {
      EXPECT_GT(typical_cell_seconds(w.name).quick, 0) << w.name << ": no typical cell time (registry.cpp)";
      EXPECT_GT(typical_cell_seconds(w.name).full, 0) << w.name << ": no typical cell time (registry.cpp)";
    }
  }
}

TEST(Registry, ParsesBinarySizes) {
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("4K"), 4096u);
  EXPECT_EQ(parse_bytes("1.5M"), 1572864u);
  EXPECT_EQ(parse_bytes("2G"), 2147483648u);
  EXPECT_THROW(parse_bytes("12Q"), std::invalid_argument);
  EXPECT_THROW(parse_bytes("x"), std::invalid_argument);
}
