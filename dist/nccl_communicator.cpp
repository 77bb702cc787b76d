// Compiled only with TUPE_HAVE_NCCL (see dist/CMakeLists.txt and nccl_communicator.h).
#include "dist/nccl_communicator.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <optional>
#include <thread>
#include <sstream>

#include "dist/check.h"
#include "dist/check_cuda.h"
#include "dist/mpi_env.h"

namespace tupe::dist {

namespace {

/// One CUDA event without timing (RAII).
class CudaEvent {
 public:
  CudaEvent() { TUPE_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~CudaEvent() { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  /// True once the work recorded before the event has finished; throws on a CUDA error.
  bool done() const {
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    TUPE_CUDA_CHECK(rc);
    return true;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

/// True for the results a non-blocking communicator gives while an operation is under way.
bool accepted(ncclResult_t rc) { return rc == ncclSuccess || rc == ncclInProgress; }

/// One collective's handle. It holds the communicator's handle through the shared
/// BackendLifetime: every NCCL call goes through while_alive(), so after an abort (which
/// frees the ncclComm_t) the handle never touches it again.
class NcclWork final : public Work {
 public:
  NcclWork(ncclComm_t comm, std::shared_ptr<BackendLifetime> lifetime, int rank, int device,
           std::shared_ptr<CudaEvent> done, std::vector<at::Tensor> tensors)
      : comm_(comm),
        lifetime_(std::move(lifetime)),
        rank_(rank),
        device_(device),
        done_(std::move(done)),
        tensors_(std::move(tensors)) {}

 protected:
  void do_wait() override {
    check_async_error();
    const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
    TUPE_CUDA_CHECK(cudaStreamWaitEvent(compute, done_->get(), 0));
  }
  bool query() override {
    if (lifetime_->ended()) return true;  // aborted: nothing more will come (wait() throws)
    check_async_error();
    return done_->done();
  }
  std::function<bool()> make_probe() override {
    // Runs on the watchdog thread, which made this rank's device current when it started. A
    // CUDA error from the event query (a sticky error: a kernel before or in the collective
    // failed, and the context is unusable) propagates, so the watchdog ends the job with that
    // error at once instead of reporting a hang at the deadline (dist/watchdog.h).
    return [done = done_, lifetime = lifetime_, rank = rank_, device = device_] {
      if (lifetime->ended()) return true;
      try {
        return done->done();
      } catch (const std::exception& e) {
        TUPE_FAIL("nccl backend: rank " << rank << ": cuda:" << device << ": " << e.what());
      }
    };
  }

 private:
  void check_async_error() const {
    ncclResult_t rc = ncclSuccess, async = ncclSuccess;
    const bool alive = lifetime_->while_alive([&] { rc = ncclCommGetAsyncError(comm_, &async); });
    TUPE_CHECK(alive, "nccl backend: rank " << rank_ << ": a collective's wait: the communicator was aborted (after "
                                                        "an earlier error or timeout)");
    if (rc != ncclSuccess || !accepted(async)) {
      // A broken communicator: abort it now (its kernels may wait on a peer forever), so
      // nothing, the destructors included, finalizes or waits on it.
      lifetime_->abort();
      TUPE_NCCL_CHECK(rc);
      TUPE_FAIL("nccl backend: rank " << rank_ << ": asynchronous NCCL error: " << ncclGetErrorString(async)
                                      << "; the communicator was aborted");
    }
  }

  const ncclComm_t comm_;  ///< valid only inside lifetime_->while_alive()
  const std::shared_ptr<BackendLifetime> lifetime_;
  int rank_;
  int device_;
  std::shared_ptr<CudaEvent> done_;  ///< recorded on the NCCL stream after the collective
  std::vector<at::Tensor> tensors_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const MpiEnv& env, const DistOptions& options, Watchdog* watchdog, int device)
      : Communicator(env, options, watchdog), device_(device) {
    // Every rank checks its device; all ranks agree before anyone waits on a broadcast.
    int device_count = 0;
    const cudaError_t count_rc = cudaGetDeviceCount(&device_count);
    int local_ok = (count_rc == cudaSuccess && device_ >= 0 && device_ < device_count) ? 1 : 0;
    int all_ok = 0;
    {
      auto mpi = env.lock();
      TUPE_MPI_CHECK(MPI_Allreduce(&local_ok, &all_ok, 1, MPI_INT, MPI_MIN, host_comm()));
    }
    TUPE_CHECK(all_ok, "nccl backend: not every rank has its CUDA device (this rank "
                           << env.rank() << ": cuda:" << device_ << ", "
                           << (count_rc == cudaSuccess ? std::to_string(device_count) + " device(s) visible"
                                                       : std::string(cudaGetErrorString(count_rc)))
                           << ")");
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    // Rank 0 creates the id; its status travels with it so no rank waits on a failed root.
    struct {
      int status;
      ncclUniqueId id;
    } boot{};
    if (env.rank() == 0) boot.status = static_cast<int>(ncclGetUniqueId(&boot.id));
    {
      auto mpi = env.lock();
      TUPE_MPI_CHECK(MPI_Bcast(&boot, sizeof(boot), MPI_BYTE, 0, host_comm()));
    }
    TUPE_CHECK(boot.status == ncclSuccess, "nccl backend: ncclGetUniqueId failed on rank 0: "
                                               << ncclGetErrorString(static_cast<ncclResult_t>(boot.status)));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every wait below is bounded by dist.timeout_s
    const ncclResult_t rc = ncclCommInitRankConfig(&comm_, env.world_size(), boot.id, env.rank(), &config);
    if (comm_ != nullptr) lifetime()->set_abort_action([comm = comm_] { ncclCommAbort(comm); });
    await(rc, "communicator set-up (ncclCommInitRankConfig)");
    stream_.emplace(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, static_cast<c10::DeviceIndex>(device_)));
  }

  ~NcclCommunicator() override {
    if (comm_ == nullptr || lifetime()->ended()) return;  // aborted: ncclCommAbort freed it
    if (unwinding_since(uncaught_at_start_)) {
      // An error is on its way out: finalizing would wait for peers that may sit in
      // collectives this rank never joins ("Failure paths" in dist/communicator.h).
      abort_backend();
      return;
    }
    // Finalize (flushes outstanding work; non-blocking here, so polled, bounded), then free.
    bool finalized = false;
    ncclResult_t started = ncclInternalError;
    lifetime()->while_alive([&] { started = ncclCommFinalize(comm_); });
    if (accepted(started)) {
      const auto start = std::chrono::steady_clock::now();
      for (;;) {
        ncclResult_t q = ncclInternalError, state = ncclSuccess;
        if (!lifetime()->while_alive([&] { q = ncclCommGetAsyncError(comm_, &state); })) return;
        if (q != ncclSuccess) break;
        if (state == ncclSuccess) {
          finalized = true;
          break;
        }
        if (state != ncclInProgress || seconds_since(start) > finalize_limit_s()) break;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    if (finalized)
      lifetime()->close([comm = comm_] { ncclCommDestroy(comm); });
    else
      abort_backend();
  }

  const char* backend_name() const override { return "nccl"; }

 protected:
  WorkPtr launch_all_reduce(const std::vector<at::Tensor>& tensors, const std::string& name) override {
    std::vector<ncclDataType_t> types;
    for (size_t i = 0; i < tensors.size(); ++i) {
      check_tensor(tensors[i], i, "all_reduce");
      types.push_back(nccl_type(tensors[i], i));
    }
    return launch(tensors, "all_reduce '" + name + "'", [&](ncclComm_t comm, cudaStream_t stream) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (tensors[i].numel() == 0) continue;
        void* p = tensors[i].data_ptr();
        check_enqueued(ncclAllReduce(p, p, static_cast<size_t>(tensors[i].numel()), types[i], ncclSum, comm, stream),
                       "ncclAllReduce");
      }
    });
  }

  WorkPtr launch_broadcast(const std::vector<at::Tensor>& tensors, int root, const std::string& name) override {
    for (size_t i = 0; i < tensors.size(); ++i) check_tensor(tensors[i], i, "broadcast");
    return launch(tensors, "broadcast '" + name + "'", [&](ncclComm_t comm, cudaStream_t stream) {
      for (const at::Tensor& t : tensors) {
        if (t.numel() == 0) continue;
        void* p = t.data_ptr();
        check_enqueued(ncclBroadcast(p, p, static_cast<size_t>(t.nbytes()), ncclUint8, root, comm, stream),
                       "ncclBroadcast");
      }
    });
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  /// How long the destructor waits for ncclCommFinalize before aborting instead (seconds).
  double finalize_limit_s() const { return options().timeout_s > 0 ? options().timeout_s : 60.0; }

  void check_enqueued(ncclResult_t rc, const char* call) const {
    TUPE_CHECK(accepted(rc), "nccl backend: rank " << rank() << ": " << call << " failed at step " << step() << ": "
                                                   << ncclGetErrorString(rc));
  }

  /// Polls the non-blocking communicator until the operation that returned `rc` is done.
  /// Past dist.timeout_s (> 0), or on an NCCL error, aborts the communicator and throws
  /// tupe::Error naming the rank, the step and `what`.
  void await(ncclResult_t rc, const std::string& what) {
    if (!accepted(rc)) {
      std::string detail;
      if (comm_ != nullptr) lifetime()->while_alive([&] { detail = ncclGetLastError(comm_); });
      abort_backend();
      TUPE_FAIL("nccl backend: rank " << rank() << ": " << what << " failed at step " << step() << ": "
                                      << ncclGetErrorString(rc) << " (" << detail << ")");
    }
    TUPE_CHECK(comm_ != nullptr && !lifetime()->ended(),
               "nccl backend: rank " << rank() << ": " << what << ": the communicator was aborted");
    const double limit_s = options().timeout_s;
    const auto start = std::chrono::steady_clock::now();
    for (int polls = 0;; ++polls) {
      ncclResult_t state = ncclSuccess, q = ncclSuccess;
      std::string detail;
      const bool alive = lifetime()->while_alive([&] {
        q = ncclCommGetAsyncError(comm_, &state);
        if (q != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) detail = ncclGetLastError(comm_);
      });
      TUPE_CHECK(alive, "nccl backend: rank " << rank() << ": " << what << " at step " << step()
                                              << ": the communicator was aborted (by the watchdog?) while waiting");
      if (q == ncclSuccess && state == ncclSuccess) return;
      if (q != ncclSuccess || state != ncclInProgress) {
        abort_backend();
        TUPE_FAIL("nccl backend: rank " << rank() << ": " << what << " failed at step " << step() << ": "
                                        << ncclGetErrorString(q != ncclSuccess ? q : state) << " (" << detail
                                        << ")");
      }
      if (limit_s > 0 && seconds_since(start) > limit_s) {
        abort_backend();
        TUPE_FAIL("nccl backend: rank " << rank() << ": " << what << " did not finish within " << limit_s
                                        << " s (dist.timeout_s) at step " << step()
                                        << "; the communicator was aborted (are all ranks running, and can the "
                                           "nodes reach each other? NCCL_DEBUG=INFO tells more)");
      }
      if (polls < 1000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  void check_tensor(const at::Tensor& t, size_t i, const char* op) const {
    TUPE_CHECK(t.defined(), "nccl backend: " << op << " tensor " << i << " is undefined");
    TUPE_CHECK(t.is_cuda() && t.device().index() == device_,
               "nccl backend: " << op << " tensor " << i << " is on " << t.device() << "; this rank's device is cuda:"
                                << device_ << " (CPU tensors need the mpi backend)");
    TUPE_CHECK(t.is_contiguous(), "nccl backend: " << op << " tensor " << i << " (sizes " << t.sizes()
                                                   << ") is not contiguous");
  }

  static ncclDataType_t nccl_type(const at::Tensor& t, size_t i) {
    switch (t.scalar_type()) {
      case at::kFloat: return ncclFloat32;
      case at::kDouble: return ncclFloat64;
      case at::kHalf: return ncclFloat16;
      case at::kBFloat16: return ncclBfloat16;
      case at::kInt: return ncclInt32;
      case at::kLong: return ncclInt64;
      case at::kByte: return ncclUint8;
      default:
        TUPE_FAIL("nccl backend: all_reduce tensor " << i << " has dtype " << t.scalar_type()
                                                     << "; supported: Float, Double, Half, BFloat16, Int, Long, Byte");
    }
  }

  /// Orders `enqueue` on the NCCL stream after the current compute stream's work, waits
  /// (bounded) until NCCL has taken it, records the completion event, and hands out the
  /// handle.
  template <class Enqueue>
  WorkPtr launch(const std::vector<at::Tensor>& tensors, const std::string& what, Enqueue enqueue) {
    const auto device = static_cast<c10::DeviceIndex>(device_);
    c10::cuda::CUDAGuard guard(device);
    const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device).stream();
    const cudaStream_t nccl = stream_->stream();
    CudaEvent inputs_ready;
    TUPE_CUDA_CHECK(cudaEventRecord(inputs_ready.get(), compute));
    TUPE_CUDA_CHECK(cudaStreamWaitEvent(nccl, inputs_ready.get(), 0));
    // The group is enqueued under the lifetime's lock (non-blocking calls), so an abort from
    // the watchdog thread waits for it; the bounded wait below polls outside the lock.
    ncclResult_t ended = ncclSuccess;
    std::exception_ptr error;
    const bool alive = lifetime()->while_alive([&] {
      check_enqueued(ncclGroupStart(), "ncclGroupStart");
      try {
        enqueue(comm_, nccl);
      } catch (...) {
        error = std::current_exception();
      }
      ended = ncclGroupEnd();
    });
    TUPE_CHECK(alive, "nccl backend: rank " << rank() << ": " << what << ": the communicator was aborted");
    if (error) std::rethrow_exception(error);
    await(ended, what);
    for (const at::Tensor& t : tensors)
      if (t.numel() > 0) c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), *stream_);
    auto done = std::make_shared<CudaEvent>();
    TUPE_CUDA_CHECK(cudaEventRecord(done->get(), nccl));
    return std::make_shared<NcclWork>(comm_, lifetime(), rank(), device_, std::move(done), tensors);
  }

  int device_;
  const int uncaught_at_start_ = std::uncaught_exceptions();  ///< for unwinding_since()
  ncclComm_t comm_ = nullptr;  ///< set once; used only inside lifetime()->while_alive()
  std::optional<c10::cuda::CUDAStream> stream_;  ///< the dedicated NCCL stream
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const MpiEnv& env, const DistOptions& options,
                                                     Watchdog* watchdog, int device_index) {
  return std::make_unique<NcclCommunicator>(env, options, watchdog, device_index);
}

}  // namespace tupe::dist
