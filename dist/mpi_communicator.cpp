#include "dist/mpi_communicator.h"

#include <c10/util/BFloat16.h>

#include <algorithm>

#include "dist/check.h"
#include "dist/mpi_env.h"
#include "dist/mpi_work.h"

namespace tupe::dist {

namespace {

/// Largest element count of one MPI call (MPI counts are int).
constexpr int64_t kMaxChunkNumel = int64_t{1} << 30;

/// MPI user op: inout[i] = in[i] + inout[i] for bf16 elements (each sum rounded to bf16).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const c10::BFloat16*>(in);
  auto* b = static_cast<c10::BFloat16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = c10::BFloat16(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

/// Checks what both collectives need: defined, CPU, contiguous.
void check_cpu_contiguous(const std::vector<at::Tensor>& tensors, const char* op) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    TUPE_CHECK(t.defined(), "mpi backend: " << op << " tensor " << i << " is undefined");
    TUPE_CHECK(t.device().is_cpu(), "mpi backend: " << op << " tensor " << i << " is on " << t.device()
                                                    << "; the MPI backend handles CPU tensors only (use nccl)");
    TUPE_CHECK(t.is_contiguous(), "mpi backend: " << op << " tensor " << i << " (sizes " << t.sizes()
                                                  << ") is not contiguous");
  }
}

}  // namespace

MpiCommunicator::MpiCommunicator(const MpiEnv& env, const DistOptions& options, Watchdog* watchdog)
    : Communicator(env, options, watchdog) {
  auto mpi = env.lock();
  TUPE_MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_sum_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && bf16_sum_ != MPI_OP_NULL) {
    auto mpi = env().lock();
    MPI_Op_free(&bf16_sum_);
  }
}

WorkPtr MpiCommunicator::launch_all_reduce(const std::vector<at::Tensor>& tensors, const std::string& /*name*/) {
  check_cpu_contiguous(tensors, "all_reduce");
  std::vector<std::pair<MPI_Datatype, MPI_Op>> types;
  for (size_t i = 0; i < tensors.size(); ++i) {
    switch (tensors[i].scalar_type()) {
      case at::kFloat: types.emplace_back(MPI_FLOAT, MPI_SUM); break;
      case at::kDouble: types.emplace_back(MPI_DOUBLE, MPI_SUM); break;
      case at::kInt: types.emplace_back(MPI_INT32_T, MPI_SUM); break;
      case at::kLong: types.emplace_back(MPI_INT64_T, MPI_SUM); break;
      case at::kBFloat16: types.emplace_back(MPI_UINT16_T, bf16_sum_); break;
      default:
        TUPE_FAIL("mpi backend: all_reduce tensor " << i << " has dtype " << tensors[i].scalar_type()
                                                    << "; supported: Float, Double, BFloat16, Int, Long");
    }
  }
  auto work = std::make_shared<MpiWork>(env(), lifetime(), tensors);
  auto mpi = env().lock();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    auto* base = static_cast<char*>(t.data_ptr());
    for (int64_t start = 0; start < t.numel(); start += kMaxChunkNumel) {
      const int64_t n = std::min(kMaxChunkNumel, t.numel() - start);
      MPI_Request request = MPI_REQUEST_NULL;
      TUPE_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, base + start * t.element_size(), static_cast<int>(n),
                                    types[i].first, types[i].second, host_comm(), &request));
      work->add_request(request);
    }
  }
  return work;
}

WorkPtr MpiCommunicator::launch_broadcast(const std::vector<at::Tensor>& tensors, int root,
                                          const std::string& /*name*/) {
  check_cpu_contiguous(tensors, "broadcast");
  auto work = std::make_shared<MpiWork>(env(), lifetime(), tensors);
  auto mpi = env().lock();
  for (const at::Tensor& t : tensors) {
    auto* base = static_cast<char*>(t.data_ptr());
    const int64_t nbytes = t.numel() * static_cast<int64_t>(t.element_size());
    for (int64_t start = 0; start < nbytes; start += kMaxChunkNumel) {
      const int64_t n = std::min(kMaxChunkNumel, nbytes - start);
      MPI_Request request = MPI_REQUEST_NULL;
      TUPE_MPI_CHECK(MPI_Ibcast(base + start, static_cast<int>(n), MPI_BYTE, root, host_comm(), &request));
      work->add_request(request);
    }
  }
  return work;
}

}  // namespace tupe::dist
