// The output folder's lock for an MPI job (folder_lock_agreed.h).
#include "dist/folder_lock_agreed.h"

#include "common/error.h"
#include "common/log.h"
#include "dist/small_collectives.h"

namespace tupe::dist {

std::unique_ptr<FolderLock> lock_output_folder(const MpiEnv& env, const std::filesystem::path& folder,
                                               const std::string& key, const std::string& command) {
  std::unique_ptr<FolderLock> lock;
  std::string error;
  if (env.rank() == 0) {
    try {
      FolderLockOptions options;
      options.key = key;
      options.command = command;
      options.stale_after_s = lock_stale_after_s_from_env();
      // A job that lost its folder to another must not write on: it ends at once.
      const std::string sub = command.rfind("tupe ", 0) == 0 ? command.substr(5) : command;  // abort says "tupe: "
      options.on_lost = [&env, sub](const std::string& message) {
        env.abort(sub + ": " + message + "; ending this job, which no longer owns the folder");
      };
      lock = FolderLock::acquire(folder, options);
      if (!lock->notice().empty()) log::info(lock->notice());
    } catch (const Error& e) {
      error = e.what();
    }
  }
  error = first_error(env, error, key + " lock");
  if (!error.empty()) throw AgreedError(error);
  return lock;
}

}  // namespace tupe::dist
