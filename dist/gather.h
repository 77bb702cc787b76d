// All-gather of one small record per rank, for checks and agreements ("did every rank take
// the same checkpoint", "did any rank get a signal", "did rank 0's save work").
#pragma once
#include <cstdint>
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

}  // namespace tupe::dist
