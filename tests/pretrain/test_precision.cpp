// Precision is resolved once and the pre-training step reads that value only: precision auto
// on a pretend GPU without bfloat16 resolves to fp16, and the step's loss scaler then scales
// (a scaler handed an unresolved auto refuses it in one line). On a GPU with bf16: bf16, no
// scaling; on the CPU: fp32, no scaling. The autocast dtype follows the same value.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "trainer/autocast.h"
#include "trainer/loss_scaler.h"
#include "trainer/pretrain/step.h"

namespace tupe::pretrain {
namespace {

using trainer::Precision;

struct Case {
  bool on_cuda, bf16;
  Precision resolved;
  bool scaling;
  at::ScalarType autocast;
};

TEST(PretrainPrecision, AutoResolvedOnceDrivesTheScalerAndAutocast) {
  PretrainConfig cfg;
  cfg.precision.precision = Precision::kAuto;
  for (const Case& c : {Case{true, false, Precision::kFp16, true, at::kHalf},
                        Case{true, true, Precision::kBf16, false, at::kBFloat16},
                        Case{false, false, Precision::kFp32, false, at::kFloat}}) {
    const Precision p = trainer::resolve_precision(cfg.precision.precision, c.on_cuda, c.bf16);
    EXPECT_EQ(p, c.resolved) << "cuda " << c.on_cuda << " bf16 " << c.bf16;
    const trainer::TrainStepOptions o = step_options(cfg, p);
    EXPECT_EQ(o.precision.precision, c.resolved);
    const trainer::DynamicLossScaler scaler(o.precision);
    EXPECT_EQ(scaler.scaling_enabled(), c.scaling) << "cuda " << c.on_cuda << " bf16 " << c.bf16;
    EXPECT_EQ(trainer::autocast_dtype(p), c.autocast);
  }
}

TEST(PretrainPrecision, AnUnresolvedAutoIsRefusedByTheScaler) {
  trainer::PrecisionOptions o;
  o.precision = Precision::kAuto;
  try {
    trainer::DynamicLossScaler scaler(o);
    FAIL() << "the scaler took precision auto";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("auto was not resolved"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tupe::pretrain
