#include "dist/mpi_env.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/log.h"
#include "dist/check.h"

namespace tupe::dist {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

MpiEnv::MpiEnv(int* argc, char*** argv, int requested_thread_level) {
  int initialized = 0;
  TUPE_MPI_CHECK(MPI_Initialized(&initialized));
  TUPE_CHECK(!initialized, "MpiEnv: MPI is already initialised in this process (create one MpiEnv in main())");
  TUPE_MPI_CHECK(MPI_Init_thread(argc, argv, requested_thread_level, &thread_level_));
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
  host_name_.assign(name, static_cast<size_t>(length));
  log::set_rank(rank_, world_size_);
}

MpiEnv::~MpiEnv() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::unique_lock<std::mutex> MpiEnv::lock() const {
  if (thread_multiple()) return std::unique_lock<std::mutex>();
  return std::unique_lock<std::mutex>(mpi_mutex_);
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
