// Error checks for MPI calls: a failing call throws tupe::Error "file:line: MPI_Xxx failed:
// <MPI error string>" (never exit() deep inside; llm.c's mpiCheck reports file:line too, but
// exits). The CUDA and NCCL checks are in dist/check_cuda.h (compiled with TUPE_HAVE_NCCL).
#pragma once
#include <mpi.h>

#include <string>

#include "common/error.h"

namespace tupe::dist {

/// The text of an MPI error code (MPI_Error_string), e.g. "MPI_ERR_TRUNCATE: message truncated".
std::string mpi_error_text(int code);

}  // namespace tupe::dist

/// TUPE_MPI_CHECK(MPI_Xxx(...)): throws tupe::Error naming file:line, the call and the
/// MPI error string when the call does not return MPI_SUCCESS. Communicators created by
/// tupe use MPI_ERRORS_RETURN so that errors reach this check.
#define TUPE_MPI_CHECK(call)                                                                   \
  do {                                                                                         \
    const int tupe_mpi_rc_ = (call);                                                           \
    TUPE_CHECK(tupe_mpi_rc_ == MPI_SUCCESS, __FILE__ << ":" << __LINE__ << ": " << #call       \
                                                     << " failed: "                            \
                                                     << ::tupe::dist::mpi_error_text(tupe_mpi_rc_)); \
  } while (0)
