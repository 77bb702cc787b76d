// The output folder's lock (common/folder_lock.h) for an MPI job: rank 0 takes it, every rank
// holds the verdict, so a refused job ends on every rank with the holder named once.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "common/folder_lock.h"
#include "dist/mpi_env.h"

namespace tupe::dist {

/// Rank 0 takes `folder`'s lock (created if missing; stale bound TUPE_LOCK_STALE_S) and logs
/// a take-over notice; returns the lock on rank 0 and nullptr on the others. A job whose
/// lock is later taken over (it was stopped past the bound) ends through env.abort. `key` names the
/// folder in messages ("checkpoint.dir"), `command` is written into the record ("tupe
/// pretrain"). Throws tupe::AgreedError on every rank with rank 0's one-line refusal
/// ("<key> <folder> is in use by ...") or its cause (a folder that cannot be created).
std::unique_ptr<FolderLock> lock_output_folder(const MpiEnv& env, const std::filesystem::path& folder,
                                               const std::string& key, const std::string& command);

}  // namespace tupe::dist
