#include "dist/small_collectives.h"

#include <ATen/ATen.h>

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <sstream>

#include "common/error.h"
#include "common/fnv1a.h"
#include "dist/check.h"
#include "dist/mpi_env.h"
#include "dist/startup.h"

namespace tupe::dist {

namespace {

/// key \0 value \0 ... : the entries as one byte string.
std::string serialise(const std::vector<AgreementEntry>& entries) {
  std::string out;
  for (const auto& [k, v] : entries) {
    out += k;
    out.push_back('\0');
    out += v;
    out.push_back('\0');
  }
  return out;
}

std::vector<AgreementEntry> deserialise(const std::string& bytes) {
  std::vector<AgreementEntry> out;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t k_end = bytes.find('\0', at);
    const size_t v_end = bytes.find('\0', k_end + 1);
    out.emplace_back(bytes.substr(at, k_end - at), bytes.substr(k_end + 1, v_end - k_end - 1));
    at = v_end + 1;
  }
  return out;
}

std::string shorten(const std::string& v) { return v.size() <= 160 ? v : v.substr(0, 157) + "..."; }

/// broadcast_string's transfer, inside the caller's start-up phase.
std::string broadcast_in_phase(const MpiEnv& env, const std::string& text, int root) {
  auto lock = env.lock();
  int64_t len = static_cast<int64_t>(text.size());
  TUPE_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT64_T, root, MPI_COMM_WORLD));
  std::string out = env.rank() == root ? text : std::string(static_cast<size_t>(len), '\0');
  // MPI counts are int: send in blocks of at most 1 GiB.
  for (int64_t at = 0; at < len; at += int64_t{1} << 30) {
    const int n = static_cast<int>(std::min<int64_t>(len - at, int64_t{1} << 30));
    TUPE_MPI_CHECK(MPI_Bcast(out.data() + at, n, MPI_CHAR, root, MPI_COMM_WORLD));
  }
  return out;
}

}  // namespace

std::string broadcast_string(const MpiEnv& env, const std::string& text, const std::string& phase, int root) {
  const StartupPhase bounded(env, phase);
  return broadcast_in_phase(env, text, root);
}

std::string first_error(const MpiEnv& env, const std::string& my_error, const std::string& phase) {
  const StartupPhase bounded(env, phase);
  int first = env.world_size();
  {
    auto lock = env.lock();
    const int mine = my_error.empty() ? env.world_size() : env.rank();
    TUPE_MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  }
  if (first == env.world_size()) return "";
  return broadcast_in_phase(env, env.rank() == first ? my_error : std::string(), first);
}

std::vector<int64_t> sum_over_ranks(const MpiEnv& env, const std::vector<int64_t>& values, const std::string& phase) {
  const StartupPhase bounded(env, phase);
  std::vector<int64_t> sums(values.size(), 0);
  auto lock = env.lock();
  TUPE_MPI_CHECK(MPI_Allreduce(values.data(), sums.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_SUM,
                               MPI_COMM_WORLD));
  return sums;
}

void barrier(const MpiEnv& env, const std::string& phase) {
  const StartupPhase bounded(env, phase);
  auto lock = env.lock();
  TUPE_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

std::string first_difference(const MpiEnv& env, const std::string& what, const std::vector<AgreementEntry>& entries) {
  if (env.world_size() == 1) return "";
  const StartupPhase bounded(env, what);
  const std::string mine = serialise(entries);
  const uint64_t record[2] = {fnv1a_64(mine), static_cast<uint64_t>(mine.size())};
  std::vector<uint64_t> all(2 * static_cast<size_t>(env.world_size()));
  {
    auto lock = env.lock();
    TUPE_MPI_CHECK(MPI_Allgather(record, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD));
  }
  int differing = -1;  // lowest rank whose entries differ from rank 0's
  for (int r = 1; r < env.world_size() && differing < 0; ++r)
    if (all[2 * static_cast<size_t>(r)] != all[0] || all[2 * static_cast<size_t>(r) + 1] != all[1]) differing = r;
  if (differing < 0) return "";
  // Rank 0's entries to every rank; the differing rank names the first difference and
  // broadcasts the text, so every rank reports the same line.
  const std::vector<AgreementEntry> reference = deserialise(broadcast_in_phase(env, mine, 0));
  std::string text;
  if (env.rank() == differing) {
    std::ostringstream os;
    os << what << ": rank " << differing << " differs from rank 0 ";
    size_t i = 0;
    while (i < reference.size() && i < entries.size() && reference[i] == entries[i]) ++i;
    if (i < reference.size() && i < entries.size()) {
      if (reference[i].first == entries[i].first)
        os << "at " << reference[i].first << ": rank 0 has '" << shorten(reference[i].second) << "', rank "
           << differing << " has '" << shorten(entries[i].second) << "'";
      else
        os << "at entry " << i + 1 << ": rank 0 has " << reference[i].first << ", rank " << differing << " has "
           << entries[i].first;
    } else {
      os << "in the number of entries: rank 0 has " << reference.size() << ", rank " << differing << " has "
         << entries.size() << " (first extra: "
         << (i < reference.size() ? reference[i].first : entries[i].first) << ")";
    }
    text = os.str();
  }
  return broadcast_in_phase(env, text, differing);
}

void require_agreement(const MpiEnv& env, const std::string& what, const std::vector<AgreementEntry>& entries) {
  const std::string diff = first_difference(env, what, entries);
  if (!diff.empty()) throw AgreedError(diff);
}

std::vector<double> all_reduce_sum(Communicator& comm, const std::vector<double>& values, const c10::Device& device,
                                   const std::string& name) {
  at::Tensor t = at::tensor(values, at::kDouble).to(device);
  return all_reduce_sum(comm, t, name);
}

std::vector<double> all_reduce_sum(Communicator& comm, at::Tensor& values, const std::string& name) {
  TUPE_CHECK(values.defined() && values.dim() == 1 && values.scalar_type() == at::kDouble,
             name << ": all_reduce_sum takes a 1-D float64 tensor");
  comm.all_reduce({values}, name)->wait();
  const at::Tensor host = values.cpu().contiguous();
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

}  // namespace tupe::dist
