// Small collectives of host values: the all-gather of one record per rank, for checks and
// agreements ("did every rank take the same checkpoint", "did any rank get a signal", "did
// rank 0's save work"), and the sum of a few numbers over ranks (losses, counts).
#pragma once
#include <cstdint>
#include <c10/core/Device.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "dist/communicator.h"

namespace tupe::dist {

/// Every rank's `value`, in rank order, through the communicator's host all-gather
/// (blocking; collective: every rank calls it with the same `name`). T is a trivially
/// copyable record of the same size everywhere. Throws like Communicator::all_gather_host.
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

/// Whether `flag` holds on any rank (collective, blocking).
inline bool any_rank(Communicator& comm, bool flag, const std::string& name) {
  for (const uint8_t v : all_gather_value<uint8_t>(comm, flag ? 1 : 0, name))
    if (v) return true;
  return false;
}

/// The sums over ranks of `values` (losses, counts): one all-reduce of a float64 tensor on
/// `device` (the communicator's), read back once. Blocking; collective (every rank calls it
/// with the same number of values and the same `name`). Throws like Communicator::all_reduce.
std::vector<double> all_reduce_sum(Communicator& comm, const std::vector<double>& values, const c10::Device& device,
                                   const std::string& name);

/// The same for values already on the device (a 1-D float64 tensor, e.g. a loss summed on the
/// device over many batches): no host copy before the all-reduce, one after it (the only
/// host sync). `values` is summed in place.
std::vector<double> all_reduce_sum(Communicator& comm, at::Tensor& values, const std::string& name);

}  // namespace tupe::dist
