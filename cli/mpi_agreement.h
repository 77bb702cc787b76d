// data_pipeline's RankAgreement (the preprocess commit protocol's collectives) over the job's
// MPI environment: dist/small_collectives.h's small collectives, each a named start-up phase until
// begin_work() (dist/startup.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "data_pipeline/preprocess_commit.h"
#include "dist/small_collectives.h"
#include "dist/mpi_env.h"

namespace tupe::cli {

/// The protocol's collectives on MPI_COMM_WORLD. Throws like dist/small_collectives.h.
class MpiAgreement final : public data_pipeline::RankAgreement {
 public:
  explicit MpiAgreement(const dist::MpiEnv& env) : env_(env) {}
  int rank() const override { return env_.rank(); }
  int world_size() const override { return env_.world_size(); }
  std::string first_error(const std::string& e) override { return dist::first_error(env_, e, "options and inputs"); }
  std::string first_difference(const std::string& what,
                               const std::vector<std::pair<std::string, std::string>>& entries) override {
    return dist::first_difference(env_, what, entries);
  }
  std::vector<int64_t> sum(const std::vector<int64_t>& values) override {
    return dist::sum_over_ranks(env_, values, "counts");
  }
  std::string broadcast(const std::string& text, int root) override {
    return dist::broadcast_string(env_, text, "run id", root);
  }
  void barrier() override { dist::barrier(env_, "barrier"); }
  void begin_work() override { env_.end_startup(); }

 private:
  const dist::MpiEnv& env_;
};

}  // namespace tupe::cli
