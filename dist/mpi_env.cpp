#include "dist/mpi_env.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "dist/check.h"
#include "dist/startup.h"
#include "dist/stall_injection.h"

namespace tupe::dist {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

namespace {

/// This process's rank before MPI is up, from the launcher's environment ("?" when none says).
std::string launcher_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* text = std::getenv(v); text != nullptr && *text != '\0') return text;
  return "?";
}

}  // namespace

MpiEnv::MpiEnv(int* argc, char*** argv, int requested_thread_level) : watch_(std::make_unique<StartupWatch>()) {
  int initialized = 0;
  TUPE_MPI_CHECK(MPI_Initialized(&initialized));
  TUPE_CHECK(!initialized, "MpiEnv: MPI is already initialised in this process (create one MpiEnv in main())");
  // MPI start-up waits for every rank of the job (the launcher's fence, the node split, the
  // host names): bounded, since a frozen node would otherwise keep every rank here forever.
  const double limit_s = startup_timeout_from_env();
  startup_timeout_s_.store(limit_s);
  watch_->arm(limit_s, [this, limit_s] {
    std::ostringstream line;
    line << "start-up: rank " << (mpi_up_.load() ? std::to_string(rank_) : launcher_rank())
         << ": MPI start-up (MPI_Init, the node split and the host names) did not finish within " << limit_s
         << " s: a rank or node of the job did not join; ending the job (" << kStartupTimeoutEnv << ")";
    if (mpi_up_.load()) abort(line.str());
    log::fatal("tupe: " + line.str());
    std::_Exit(1);  // before MPI is up: the launcher sees the exit and stops the other ranks
  });
  if (const StallInjection stall = stall_injection_from_env();  // test hook (dist/stall_injection.h)
      stall.active() && stall.phase == kMpiStartupPhase && launcher_rank() == std::to_string(stall.rank))
    sleep_for_stall(stall, "rank " + launcher_rank() + " before MPI_Init");
  TUPE_MPI_CHECK(MPI_Init_thread(argc, argv, requested_thread_level, &thread_level_));
  mpi_up_.store(true);
  // From here on errors on MPI_COMM_WORLD come back as codes (for TUPE_MPI_CHECK).
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (thread_level_ < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    TUPE_FAIL("MpiEnv: the MPI library grants thread level " << thread_level_
                                                             << ", tupe needs at least MPI_THREAD_SERIALIZED");
  }
  TUPE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  TUPE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  MPI_Comm node = MPI_COMM_NULL;
  TUPE_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  TUPE_MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
  TUPE_MPI_CHECK(MPI_Comm_size(node, &local_world_size_));
  TUPE_MPI_CHECK(MPI_Comm_free(&node));
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int length = 0;
  TUPE_MPI_CHECK(MPI_Get_processor_name(name, &length));
  std::vector<char> all(static_cast<size_t>(world_size_) * MPI_MAX_PROCESSOR_NAME, '\0');
  TUPE_MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                               MPI_COMM_WORLD));
  for (int r = 0; r < world_size_; ++r) {
    const char* h = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hosts_.emplace_back(h, strnlen(h, MPI_MAX_PROCESSOR_NAME));
  }
  TUPE_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &arrival_comm_));
  TUPE_MPI_CHECK(MPI_Comm_set_errhandler(arrival_comm_, MPI_ERRORS_RETURN));
  watch_->disarm();
  log::set_rank(rank_, world_size_);
}

MpiEnv::~MpiEnv() {
  watch_->disarm();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (arrival_comm_ != MPI_COMM_NULL) MPI_Comm_free(&arrival_comm_);
  MPI_Finalize();
}

std::unique_lock<std::mutex> MpiEnv::lock() const {
  if (thread_multiple()) return std::unique_lock<std::mutex>();
  return std::unique_lock<std::mutex>(mpi_mutex_);
}

void MpiEnv::end_startup() const {
  in_startup_.store(false);
  // Test hook (dist/stall_injection.h): TUPE_TEST_STALL="rank=R,phase=work[,freeze=1]".
  const StallInjection stall = stall_injection_from_env();
  if (stall.active() && stall.phase == kWorkPhase && stall.rank == rank_ && !work_stall_done_.exchange(true)) {
    log::warn(std::string(kStallInjectionEnv) + " stall injection: " + (stall.freeze ? "stopping (SIGSTOP)" : "sleeping") +
              " as the work begins");
    sleep_for_stall(stall, "rank " + std::to_string(rank_) + " at work");
  }
}

void MpiEnv::abort(const std::string& message, int exit_code, const std::function<void()>& before_exit) const {
  if (!message.empty()) log::fatal("tupe: " + message);
  if (before_exit) {
    try {
      before_exit();
    } catch (...) {
      // Ending the job matters more than a failed clean-up.
    }
  }
  // Under MPI_THREAD_SERIALIZED, take the MPI lock if it frees up within ~1 s (tupe never
  // blocks while holding it); abort regardless after that -- a hang is worse.
  std::unique_lock<std::mutex> mpi(mpi_mutex_, std::defer_lock);
  for (int i = 0; !thread_multiple() && i < 100 && !mpi.try_lock(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

}  // namespace tupe::dist
