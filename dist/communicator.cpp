#include "dist/communicator.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/config_fields.h"
#include "common/log.h"
#include "dist/check.h"
#include "dist/mpi_env.h"
#include "dist/mpi_work.h"
#include "dist/watchdog.h"

namespace tupe::dist {

// ---- Work ------------------------------------------------------------------------------

Work::~Work() = default;

void Work::wait() {
  do_wait();
  if (query()) mark_complete();
}

bool Work::test() {
  if (complete_.load()) return true;
  const bool done = query();
  if (done) mark_complete();
  return done;
}

void Work::mark_complete() {
  if (!complete_.exchange(true) && watchdog_ != nullptr) watchdog_->finish(watch_id_);
}

// ---- Communicator ----------------------------------------------------------------------

Communicator::Communicator(const MpiEnv& env, const DistOptions& options, Watchdog* watchdog)
    : env_(env), options_(options), stall_(stall_injection_from_env()), watchdog_(watchdog) {
  options_.validate();
  auto mpi = env_.lock();
  TUPE_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &host_comm_));
  TUPE_MPI_CHECK(MPI_Comm_set_errhandler(host_comm_, MPI_ERRORS_RETURN));
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After an abort the host communicator may still carry parked requests: left to the
  // ending process, like them (dist/backend_lifetime.h).
  if (!finalized && host_comm_ != MPI_COMM_NULL && !aborted()) {
    auto mpi = env_.lock();
    MPI_Comm_free(&host_comm_);
  }
}

int Communicator::rank() const { return env_.rank(); }

void Communicator::check_not_aborted(const char* op, const std::string& name) const {
  TUPE_CHECK(!aborted(), backend_name() << " backend: rank " << rank() << ": " << op << " '" << name
                                        << "': the communicator was aborted (after an earlier error or timeout)");
}
int Communicator::world_size() const { return env_.world_size(); }

CollectiveCounts Communicator::counts() const {
  return {n_all_reduce_.load(), n_broadcast_.load(), n_all_gather_.load(), n_barrier_.load()};
}

void Communicator::maybe_stall(const std::string& name) {
  if (!stall_.active() || !stall_.phase.empty() || stall_.rank != env_.rank()) return;
  if (stall_.step >= 0 && stall_.step != step()) return;
  if (stalled_.exchange(true)) return;
  log::warn(std::string(kStallInjectionEnv) + " stall injection: sleeping " + format_double(stall_.seconds) +
            " s before collective '" + name + "' at step " + std::to_string(step()));
  std::this_thread::sleep_for(std::chrono::duration<double>(stall_.seconds));
}

WorkPtr Communicator::track(WorkPtr work, const std::string& name) {
  if (watchdog_ != nullptr) {
    work->watchdog_ = watchdog_;
    work->watch_id_ = watchdog_->start(std::string(backend_name()) + " " + name, step(), work->make_probe());
  }
  return work;
}

WorkPtr Communicator::all_reduce(const std::vector<at::Tensor>& tensors, const std::string& name) {
  check_not_aborted("all_reduce", name);
  maybe_stall(name);
  WorkPtr work = launch_all_reduce(tensors, name);
  ++n_all_reduce_;
  return track(std::move(work), name);
}

WorkPtr Communicator::broadcast(const std::vector<at::Tensor>& tensors, int root, const std::string& name) {
  TUPE_CHECK(root >= 0 && root < world_size(),
             backend_name() << " backend: broadcast '" << name << "': root " << root << " is not a rank of "
                            << world_size());
  check_not_aborted("broadcast", name);
  maybe_stall(name);
  WorkPtr work = launch_broadcast(tensors, root, name);
  ++n_broadcast_;
  return track(std::move(work), name);
}

WorkPtr Communicator::all_gather_host(const std::vector<uint8_t>& local, std::vector<uint8_t>& gathered,
                                      const std::string& name) {
  TUPE_CHECK(local.size() <= static_cast<size_t>(1) << 30,
             "all_gather_host '" << name << "': " << local.size() << " bytes; meant for small buffers (<= 1 GiB)");
  check_not_aborted("all_gather_host", name);
  maybe_stall(name);
  gathered.assign(local.size() * static_cast<size_t>(world_size()), 0);
  // The send buffer must outlive the call: copy it into a tensor the handle keeps.
  at::Tensor send = at::empty({static_cast<int64_t>(local.size())}, at::kByte);
  if (!local.empty()) std::memcpy(send.data_ptr(), local.data(), local.size());
  auto work = std::make_shared<MpiWork>(env_, lifetime_, std::vector<at::Tensor>{send});
  MPI_Request request = MPI_REQUEST_NULL;
  {
    auto mpi = env_.lock();
    const int n = static_cast<int>(local.size());
    TUPE_MPI_CHECK(MPI_Iallgather(send.data_ptr(), n, MPI_BYTE, gathered.data(), n, MPI_BYTE, host_comm_, &request));
  }
  work->add_request(request);
  ++n_all_gather_;
  return track(std::move(work), name);
}

WorkPtr Communicator::barrier(const std::string& name) {
  check_not_aborted("barrier", name);
  maybe_stall(name);
  auto work = std::make_shared<MpiWork>(env_, lifetime_, std::vector<at::Tensor>{});
  MPI_Request request = MPI_REQUEST_NULL;
  {
    auto mpi = env_.lock();
    TUPE_MPI_CHECK(MPI_Ibarrier(host_comm_, &request));
  }
  work->add_request(request);
  ++n_barrier_;
  return track(std::move(work), name);
}

}  // namespace tupe::dist
