// The small collectives of host values, in one family: how ranks agree, and how they exchange
// a few values. Two transports carry them, and each function names its own:
//   - the MpiEnv (MPI_COMM_WORLD, under MpiEnv::lock()): usable before any communicator
//     exists. Each call is one start-up phase (dist/startup.h) named by its `what` or
//     `phase`: until the job's work begins, a rank that does not arrive within
//     dist.startup_timeout_s ends the job with one line naming the phase and the missing ranks;
//   - the job's Communicator (its host communicator): every call is registered with the
//     collective watchdog (dist.timeout_s), like a training step's collectives.
// Every function is collective and blocking: every rank calls it, in the same order (and with
// the same `name`/`what`/`phase`).
//
// Agreement: one collective check of what each rank read or configured, described as ordered
// (key, value) entries: config keys, shard files with their sizes and index hashes,
// preprocess inputs. A mismatch is reported with the first differing key, the same one-line
// text on every rank, so a job whose ranks see different data (relative paths from
// different working folders, node-local copies that differ) stops before step 1.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/config_fields.h"
#include "dist/communicator.h"

namespace tupe::dist {

class MpiEnv;

// ---- agreement -----------------------------------------------------------------------------

/// One described item: key (e.g. "train shard 0") and value (e.g. "train-00000-of-00002.h5,
/// 154219 bytes, 1258 sequences, ...").
using AgreementEntry = std::pair<std::string, std::string>;

/// MpiEnv: "" when every rank passed the same entries (same keys, values, order);
/// otherwise, on every rank, "<what>: rank R differs from rank 0 at <key>: rank 0 has
/// '<v0>', rank R has '<vR>'" for the lowest differing rank R and its first differing entry
/// (or the count, when one list is a prefix of the other). Throws tupe::Error on an MPI error.
std::string first_difference(const MpiEnv& env, const std::string& what, const std::vector<AgreementEntry>& entries);

/// MpiEnv: throws tupe::AgreedError (every rank, the same text: first_difference's)
/// when the ranks' entries differ.
void require_agreement(const MpiEnv& env, const std::string& what, const std::vector<AgreementEntry>& entries);

/// MpiEnv: "" when `my_error` is "" on every rank, else the error of the lowest rank
/// with one, on every rank (ranks agree whether a phase succeeded, and on one message).
std::string first_error(const MpiEnv& env, const std::string& my_error, const std::string& phase);

template <class T>
std::vector<T> all_gather_value(Communicator& comm, const T& value, const std::string& name);

/// Communicator: whether `flag` holds on any rank.
inline bool any_rank(Communicator& comm, bool flag, const std::string& name) {
  for (const uint8_t v : all_gather_value<uint8_t>(comm, flag ? 1 : 0, name))
    if (v) return true;
  return false;
}

/// A config's entries ("section.key" -> value), in key order.
inline std::vector<AgreementEntry> config_entries(const KeyValues& config) {
  return std::vector<AgreementEntry>(config.begin(), config.end());
}

// ---- exchange ------------------------------------------------------------------------------

/// MpiEnv: the element-wise sums of `values` (the same length on every rank) over ranks.
std::vector<int64_t> sum_over_ranks(const MpiEnv& env, const std::vector<int64_t>& values, const std::string& phase);

/// MpiEnv: returns when every rank has entered it.
void barrier(const MpiEnv& env, const std::string& phase);

/// MpiEnv: `text` of rank `root` on every rank.
std::string broadcast_string(const MpiEnv& env, const std::string& text, const std::string& phase, int root = 0);

/// Communicator: every rank's `value`, in rank order, through its host all-gather. T is a
/// trivially copyable record of the same size everywhere. Throws like
/// Communicator::all_gather_host.
template <class T>
std::vector<T> all_gather_value(Communicator& comm, const T& value, const std::string& name) {
  static_assert(std::is_trivially_copyable_v<T>, "all_gather_value sends the record's bytes");
  std::vector<uint8_t> local(sizeof(T)), all;
  std::memcpy(local.data(), &value, sizeof(T));
  comm.all_gather_host(local, all, name)->wait();
  std::vector<T> out(all.size() / sizeof(T));
  std::memcpy(out.data(), all.data(), out.size() * sizeof(T));
  return out;
}

/// Communicator: the sums over ranks of `values` (losses, counts): one all-reduce of a float64
/// tensor on `device` (the communicator's), read back once. Throws like
/// Communicator::all_reduce.
std::vector<double> all_reduce_sum(Communicator& comm, const std::vector<double>& values, const c10::Device& device,
                                   const std::string& name);

/// The same for values already on the device (a 1-D float64 tensor, e.g. a loss summed on the
/// device over many batches): no host copy before the all-reduce, one after it (the only
/// host sync). `values` is summed in place.
std::vector<double> all_reduce_sum(Communicator& comm, at::Tensor& values, const std::string& name);

}  // namespace tupe::dist
