// train.profile_steps (trainer/pretrain/step_trace.h, dist/trace.h) without a run: the value's
// parsing and refusals, the trace path, and a StepTrace over steps 2..3 of a loop of four that
// writes one Chrome trace holding "step 2" and "step 3" with their ranges, and nothing of
// steps 1 and 4; a range's name built at run time; the bucket range reported with its own times.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "dist/trace.h"
#include "trainer/pretrain/step_trace.h"
#include "trainer/pretrain/train_options.h"

namespace tupe::pretrain {
namespace {

TEST(ProfileSteps, ParsesAToBAndOff) {
  EXPECT_FALSE(profile_step_range("").has_value());
  EXPECT_FALSE(profile_step_range("off").has_value());
  const auto r = profile_step_range("20:24");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, 20);
  EXPECT_EQ(r->last, 24);
  const auto one = profile_step_range("7:7");
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->first, 7);
  EXPECT_EQ(one->last, 7);
}

TEST(ProfileSteps, RefusesInOneLineNamingTheKey) {
  for (const char* bad : {"5:3", "0:2", "12", "a:3", "3:", ":3", "-1:2", "1:2:3", "1 :2", "99999999999999999999:1"}) {
    try {
      profile_step_range(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("train.profile_steps: '", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  TrainOptions t;
  t.profile_steps = "4:2";
  EXPECT_THROW(t.validate(), Error);
}

TEST(ProfileSteps, TracePathPerRank) {
  EXPECT_EQ(trace_path("runs/x", 3, {4, 5}), "runs/x/traces/rank3-steps4-5.json");
}

/// The "X" events of a trace file by name: (start us, duration us).
std::multimap<std::string, std::pair<double, double>> complete_events(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::multimap<std::string, std::pair<double, double>> out;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("ph", "") == "X") out.emplace(e.at("name").get<std::string>(), std::make_pair(e.at("ts").get<double>(), e.at("dur").get<double>()));
  return out;
}

TEST(StepTrace, TracesTheAskedStepsOnly) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tupe_step_trace_test";
  std::filesystem::remove_all(dir);
  StepTrace trace(ProfileStepRange{2, 3}, dir.string(), 1, /*cuda=*/false);
  std::string written;
  dist::AsyncTraceRange bucket(dist::trace_names::all_reduce_bucket(0));
  for (int64_t step = 1; step <= 4; ++step) {
    trace.before_step(step);
    {
      const dist::TraceRange r(dist::trace_names::kForward);
      at::Tensor a = at::ones({64, 64});
      at::mm(a, a);
      bucket.begin();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      bucket.mark_end();
    }
    {
      const dist::TraceRange r(std::string("named at run time ") + std::to_string(step));
    }
    bucket.end();
    const std::string path = trace.after_step(step);
    if (!path.empty()) {
      EXPECT_TRUE(written.empty()) << "a second trace: " << path;
      written = path;
      EXPECT_EQ(step, 3);
    }
  }
  EXPECT_EQ(trace.finish(), "");
  ASSERT_EQ(written, (dir / "traces" / "rank1-steps2-3.json").string());
  const auto events = complete_events(written);
  EXPECT_EQ(events.count("step 1"), 0u);
  EXPECT_EQ(events.count("step 2"), 1u);
  EXPECT_EQ(events.count("step 3"), 1u);
  EXPECT_EQ(events.count("step 4"), 0u);
  EXPECT_EQ(events.count("forward"), 2u);
  EXPECT_EQ(events.count("named at run time 2"), 1u);
  EXPECT_EQ(events.count("named at run time 4"), 0u);
  EXPECT_GE(events.count("aten::mm"), 2u);
  // The bucket's range: begin to mark_end (>= 2 ms of sleep), inside its step.
  const auto buckets = events.equal_range("all-reduce bucket 0");
  ASSERT_EQ(std::distance(buckets.first, buckets.second), 2);
  const auto step2 = events.find("step 2")->second;
  const auto step3 = events.find("step 3")->second;
  for (auto it = buckets.first; it != buckets.second; ++it) {
    const auto [ts, dur] = it->second;
    EXPECT_GE(dur, 1900.0);
    EXPECT_LT(dur, 1e6);
    const bool in2 = ts >= step2.first - 1 && ts + dur <= step2.first + step2.second + 1;
    const bool in3 = ts >= step3.first - 1 && ts + dur <= step3.first + step3.second + 1;
    EXPECT_TRUE(in2 || in3) << "bucket range at " << ts << " outside steps 2 and 3";
  }
  std::filesystem::remove_all(dir);
}

TEST(StepTrace, OffDoesNothing) {
  StepTrace trace(std::nullopt, "/nonexistent", 0, false);
  trace.before_step(1);
  EXPECT_EQ(trace.after_step(1), "");
  EXPECT_EQ(trace.finish(), "");
}

}  // namespace
}  // namespace tupe::pretrain
