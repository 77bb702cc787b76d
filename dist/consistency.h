// Start-of-training agreement between ranks (before step 1): rank 0's initial parameters
// are copied to every rank, and every rank must hold the same
// parameters (count, names, dtypes, shapes) -- c10d's verify_params_across_processes.
// (The config and the data are compared key by key through dist/small_collectives.h.)
// All functions are collective (every rank calls them, in the same order) and blocking;
// a mismatch throws the same tupe::Error on every rank, naming the ranks that differ.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/fnv1a.h"
#include "dist/communicator.h"
#include "dist/grad_buffer.h"

namespace tupe::dist {

/// Overwrites every rank's tensors with rank `root`'s values (in place, no autograd
/// record), e.g. the initial parameters and buffers. Non-contiguous tensors go through a
/// contiguous copy.
void broadcast_tensors(Communicator& comm, const std::vector<NamedParameter>& tensors, int root = 0);

/// Throws tupe::Error naming the differing ranks and their parameter counts and element
/// totals unless every rank holds the same parameter list (names, dtypes, shapes, order).
void check_same_parameters(Communicator& comm, const std::vector<NamedParameter>& params);

}  // namespace tupe::dist
