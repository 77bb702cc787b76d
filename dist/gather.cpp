#include "dist/gather.h"

#include <ATen/ATen.h>

#include "common/error.h"

namespace tupe::dist {

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
