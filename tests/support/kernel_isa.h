// Test fixture: a parameterised test run once per kernel variant this CPU runs (cpu_isa.h:
// baseline SSE, AVX2, AVX-512), each forced in turn and the previous one restored after.
//   INSTANTIATE_TEST_SUITE_P(Isas, MyTest, ::testing::ValuesIn(supported_isas()), isa_test_name);
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "titan/models/common/kernels/cpu_isa.h"

namespace titan::testing {

class EachKernelIsa : public ::testing::TestWithParam<models::kernels::CpuIsa> {
 protected:
  void SetUp() override {
    before_ = models::kernels::kernel_isa();
    models::kernels::set_kernel_isa(GetParam());
  }
  void TearDown() override { models::kernels::set_kernel_isa(before_); }

 private:
  models::kernels::CpuIsa before_ = models::kernels::CpuIsa::kBaseline;
};

/// The test's name suffix: the variant as TITAN_KERNEL_ISA spells it.
inline std::string isa_test_name(
    const ::testing::TestParamInfo<models::kernels::CpuIsa>& info) {
  return models::kernels::isa_name(info.param);
}

}  // namespace titan::testing
