// GoogleTest main for the multi-rank dist tests (run under mpirun by CTest). Every rank runs
// every test; ranks other than 0 print only failures, prefixed with their rank. The exit
// code is non-zero on EVERY rank when any rank failed (the failure flags are all-reduced).
// With the argument --mpi_serialized, MPI is initialised with MPI_THREAD_SERIALIZED, so
// every MPI call goes through MpiEnv::lock().
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>

#include "dist/mpi_communicator.h"
#include "tests/dist/mpi_test_env.h"

namespace tupe::dist::mpitest {

namespace {
struct State {
  std::unique_ptr<MpiEnv> env;
  std::unique_ptr<Watchdog> watchdog;
};
State& state() {
  static State s;
  return s;
}

/// Prints failed assertions of a rank other than 0 with the rank in front.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.message());
  }

 private:
  int rank_;
};
}  // namespace

const MpiEnv& env() { return *state().env; }
Watchdog& watchdog() { return *state().watchdog; }

std::unique_ptr<Communicator> make_mpi_comm(DistOptions options) {
  options.backend = BackendKind::kMpi;
  return std::make_unique<MpiCommunicator>(env(), options, &watchdog());
}

int64_t sum_over_ranks(int64_t value) {
  int64_t sum = 0;
  MPI_Allreduce(&value, &sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

double sum_over_ranks(double value) {
  double sum = 0;
  MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

}  // namespace tupe::dist::mpitest

int main(int argc, char** argv) {
  using namespace tupe::dist;
  auto& s = mpitest::state();
  bool serialized = false;
  for (int i = 1; i < argc; ++i) serialized = serialized || std::strcmp(argv[i], "--mpi_serialized") == 0;
  s.env = std::make_unique<MpiEnv>(&argc, &argv, serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE);
  const MpiEnv& env = *s.env;
  if (env.rank() == 0)
    std::printf("MPI thread level: %s\n", env.thread_multiple() ? "MPI_THREAD_MULTIPLE" : "MPI_THREAD_SERIALIZED");
  if (serialized && env.thread_multiple()) {
    std::fprintf(stderr, "--mpi_serialized: MPI granted MPI_THREAD_MULTIPLE anyway\n");
    return 1;
  }
  s.watchdog = std::make_unique<Watchdog>(env.rank(), 120.0, [&env](const std::string& m) { env.abort(m); });
  ::testing::InitGoogleTest(&argc, argv);
  if (env.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new mpitest::RankFailurePrinter(env.rank()));
  }
  const int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (env.rank() == 0 && any_failed) std::fprintf(stderr, "dist tests: a test failed on at least one rank\n");
  s.watchdog.reset();
  s.env.reset();
  return any_failed ? 1 : 0;
}
