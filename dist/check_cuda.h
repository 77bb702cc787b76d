// Error checks for CUDA runtime and NCCL calls (only in builds with TUPE_HAVE_NCCL): a
// failing call throws tupe::Error "file:line: <call> failed: <error name>: <error string>".
// NCCL's asynchronous errors are read with ncclCommGetAsyncError by the NCCL work handles;
// a CUDA error that a completion probe meets reaches the watchdog (dist/watchdog.h) as that
// error.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "common/error.h"

/// TUPE_CUDA_CHECK(cudaXxx(...)): throws tupe::Error unless the call returns cudaSuccess.
#define TUPE_CUDA_CHECK(call)                                                                      \
  do {                                                                                             \
    const cudaError_t tupe_cuda_rc_ = (call);                                                      \
    TUPE_CHECK(tupe_cuda_rc_ == cudaSuccess, __FILE__ << ":" << __LINE__ << ": " << #call            \
                                                      << " failed: " << cudaGetErrorName(tupe_cuda_rc_) \
                                                      << ": " << cudaGetErrorString(tupe_cuda_rc_)); \
  } while (0)

/// TUPE_NCCL_CHECK(ncclXxx(...)): throws tupe::Error unless the call returns ncclSuccess.
/// ncclInProgress counts as failure here: tupe's communicators are non-blocking
/// (ncclConfig_t.blocking = 0, dist/nccl_communicator.h), so calls that may return it
/// (init, enqueue, finalize) are checked with nccl_communicator.cpp's accepted() and polled
/// with ncclCommGetAsyncError instead; this macro is for calls that complete at once.
#define TUPE_NCCL_CHECK(call)                                                                  \
  do {                                                                                         \
    const ncclResult_t tupe_nccl_rc_ = (call);                                                 \
    TUPE_CHECK(tupe_nccl_rc_ == ncclSuccess, __FILE__ << ":" << __LINE__ << ": " << #call       \
                                                      << " failed: " << ncclGetErrorString(tupe_nccl_rc_) \
                                                      << " (" << ncclGetLastError(nullptr) << ")"); \
  } while (0)
