// Shared state of the multi-rank GoogleTest binary (tests/dist/mpi_test_main.cpp): the MPI
// environment and a watchdog that turns a hang inside a test into a failed job instead of
// a blocked CTest. Tests keep every rank in step: each computes its local verdict, the
// verdicts are summed over ranks, and every rank asserts on the same sum.
#pragma once
#include <cstdint>
#include <memory>

#include "dist/communicator.h"
#include "dist/mpi_env.h"
#include "dist/options.h"
#include "dist/watchdog.h"

namespace tupe::dist::mpitest {

/// The process's MPI environment (created by main()).
const MpiEnv& env();
/// The process's watchdog (timeout 120 s, aborts the job).
Watchdog& watchdog();
/// A fresh MPI communicator with `options` and the test watchdog.
std::unique_ptr<Communicator> make_mpi_comm(DistOptions options = {});
/// Sum of `value` over all ranks (MPI_Allreduce on MPI_COMM_WORLD).
int64_t sum_over_ranks(int64_t value);
double sum_over_ranks(double value);

}  // namespace tupe::dist::mpitest
