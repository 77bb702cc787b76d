// Do all ranks agree? One collective check of what each rank read or configured, described
// as ordered (key, value) entries: config keys, shard files with their sizes and index
// hashes, preprocess inputs. A mismatch is reported with the first differing key, the
// same one-line text on every rank, so a job whose ranks see different data (relative
// paths from different working folders, node-local copies that differ) stops before step 1.
// Uses MPI_COMM_WORLD through the MpiEnv (under its lock); blocking; every rank calls it in
// the same order. Each call is one start-up phase (dist/startup.h) named by its `what` or
// `phase`: until the job's work begins, a rank that does not arrive within
// dist.startup_timeout_s ends the job with one line naming the phase and the missing ranks.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "common/config_fields.h"

namespace tupe::dist {

class MpiEnv;

/// One described item: key (e.g. "train shard 0") and value (e.g. "train-00000-of-00002.h5,
/// 154219 bytes, 1258 sequences, ...").
using AgreementEntry = std::pair<std::string, std::string>;

/// Collective. "" when every rank passed the same entries (same keys, values, order);
/// otherwise, on every rank, "<what>: rank R differs from rank 0 at <key>: rank 0 has
/// '<v0>', rank R has '<vR>'" for the lowest differing rank R and its first differing entry
/// (or the count, when one list is a prefix of the other). Throws tupe::Error on an MPI error.
std::string first_difference(const MpiEnv& env, const std::string& what, const std::vector<AgreementEntry>& entries);

/// Collective: throws tupe::AgreedError (every rank, the same text: first_difference's)
/// when the ranks' entries differ.
void require_agreement(const MpiEnv& env, const std::string& what, const std::vector<AgreementEntry>& entries);

/// Collective: "" when `my_error` is "" on every rank, else the error of the lowest rank
/// with one, on every rank (ranks agree whether a phase succeeded, and on one message).
std::string first_error(const MpiEnv& env, const std::string& my_error, const std::string& phase);

/// Collective: the element-wise sums of `values` (the same length on every rank) over ranks.
std::vector<int64_t> sum_over_ranks(const MpiEnv& env, const std::vector<int64_t>& values, const std::string& phase);

/// Collective: returns when every rank has entered it.
void barrier(const MpiEnv& env, const std::string& phase);

/// Collective: `text` of rank `root` on every rank.
std::string broadcast_string(const MpiEnv& env, const std::string& text, const std::string& phase, int root = 0);

/// A config's entries ("section.key" -> value), in key order.
inline std::vector<AgreementEntry> config_entries(const KeyValues& config) {
  return std::vector<AgreementEntry>(config.begin(), config.end());
}

}  // namespace tupe::dist
