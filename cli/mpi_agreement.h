// data_pipeline's RankAgreement (the preprocess commit protocol's collectives) over the job's
// MPI environment: dist/small_collectives.h's small collectives, each a named start-up phase until
// begin_work() (dist/startup.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "data_pipeline/preprocess_commit.h"
#include "dist/heartbeat.h"
#include "dist/small_collectives.h"
#include "dist/mpi_env.h"

namespace tupe::cli {

/// The protocol's collectives on MPI_COMM_WORLD. Throws like dist/small_collectives.h. With a
/// heartbeat set, each collective names itself as what this rank waits for, so that a line
/// about a silent rank says what the others were waiting in (dist/heartbeat.h).
class MpiAgreement final : public data_pipeline::RankAgreement {
 public:
  explicit MpiAgreement(const dist::MpiEnv& env) : env_(env) {}
  /// The job's heartbeat (may be null); it must outlive the calls made after.
  void set_heartbeat(dist::Heartbeat* heartbeat) {
    heartbeat_ = heartbeat;
    if (heartbeat_) heartbeat_->set_activity(work_);
  }
  int rank() const override { return env_.rank(); }
  int world_size() const override { return env_.world_size(); }
  std::string first_error(const std::string& e) override {
    const std::string phase = work_ == "starting" ? "options and inputs" : "the shards' write";
    return waiting(phase, [&] { return dist::first_error(env_, e, phase); });
  }
  std::string first_difference(const std::string& what,
                               const std::vector<std::pair<std::string, std::string>>& entries) override {
    return waiting(what, [&] { return dist::first_difference(env_, what, entries); });
  }
  std::vector<int64_t> sum(const std::vector<int64_t>& values) override {
    return waiting("counts", [&] { return dist::sum_over_ranks(env_, values, "counts"); });
  }
  std::string broadcast(const std::string& text, int root) override {
    return waiting("run id", [&] { return dist::broadcast_string(env_, text, "run id", root); });
  }
  void barrier() override {
    waiting("barrier", [&] {
      dist::barrier(env_, "barrier");
      return 0;
    });
  }
  void begin_work() override {
    env_.end_startup();
    work_ = "writing its shards";
    if (heartbeat_) heartbeat_->set_activity(work_);
  }

 private:
  template <class F>
  auto waiting(const std::string& what, F&& collective) -> decltype(collective()) {
    if (heartbeat_) heartbeat_->set_activity("waiting for the other ranks in '" + what + "'");
    auto result = collective();
    if (heartbeat_) heartbeat_->set_activity(work_);
    return result;
  }
  const dist::MpiEnv& env_;
  dist::Heartbeat* heartbeat_ = nullptr;
  std::string work_ = "starting";
};

}  // namespace tupe::cli
