#include "dist/consistency.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cstring>
#include <sstream>

#include "common/error.h"
#include "dist/small_collectives.h"

namespace tupe::dist {

namespace {

/// One rank's fixed-size record for the all-gather.
struct Fingerprint {
  uint64_t hash = 0;
  int64_t count = 0;  ///< bytes of config text, or number of parameters
  int64_t total = 0;  ///< 0, or total elements of the parameters
};

std::vector<Fingerprint> gather(Communicator& comm, const Fingerprint& mine, const std::string& name) {
  return all_gather_value(comm, mine, name);
}

/// Ranks whose record differs from rank 0's, as "1, 3".
std::string differing_ranks(const std::vector<Fingerprint>& all) {
  std::ostringstream os;
  bool any = false;
  for (size_t r = 1; r < all.size(); ++r) {
    const bool same = all[r].hash == all[0].hash && all[r].count == all[0].count && all[r].total == all[0].total;
    if (!same) os << (any ? ", " : "") << r;
    any = any || !same;
  }
  return os.str();
}

}  // namespace

void broadcast_tensors(Communicator& comm, const std::vector<NamedParameter>& tensors, int root) {
  c10::AutoGradMode no_grad(false);
  std::vector<at::Tensor> send;
  for (const auto& t : tensors) send.push_back(t.tensor.is_contiguous() ? t.tensor.detach() : t.tensor.contiguous());
  comm.broadcast(send, root, "broadcast initial parameters")->wait();
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].tensor.is_contiguous()) tensors[i].tensor.detach().copy_(send[i]);
}

void check_same_parameters(Communicator& comm, const std::vector<NamedParameter>& params) {
  std::ostringstream description;
  Fingerprint mine;
  mine.count = static_cast<int64_t>(params.size());
  for (const auto& p : params) {
    description << p.name << ':' << p.tensor.scalar_type() << ':' << p.tensor.sizes() << ';';
    mine.total += p.tensor.numel();
  }
  mine.hash = fnv1a_64(description.str());
  const auto all = gather(comm, mine, "parameter check all_gather");
  const std::string ranks = differing_ranks(all);
  if (ranks.empty()) return;
  std::ostringstream os;
  os << "parameter check: ranks hold different parameters: rank(s) " << ranks << " differ from rank 0 (";
  for (size_t r = 0; r < all.size(); ++r)
    os << (r ? "; " : "") << "rank " << r << ": " << all[r].count << " parameters, " << all[r].total
       << " elements, names/shapes hash " << std::hex << all[r].hash << std::dec;
  os << ")";
  TUPE_FAIL(os.str());
}

}  // namespace tupe::dist
