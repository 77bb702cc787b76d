#include "trainer/rng_state.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <mutex>

#include "common/error.h"

namespace tupe::trainer {

namespace {

std::vector<uint8_t> state_of(at::Generator gen) {
  at::Tensor t;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    t = gen.get_state();
  }
  t = t.contiguous();
  const auto* p = t.data_ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + t.numel());
}

void set_state(at::Generator gen, const std::vector<uint8_t>& bytes, const std::string& what) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  try {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(t);
  } catch (const c10::Error& e) {
    TUPE_FAIL("rng state: " << what << " state of " << bytes.size() << " bytes rejected: " << e.what_without_backtrace());
  }
}

}  // namespace

RngStates capture_rng_states() {
  RngStates out;
  out.cpu = state_of(at::detail::getDefaultCPUGenerator());
  if (at::hasCUDA()) {
    const size_t devices = at::getNumGPUs();
    for (size_t i = 0; i < devices; ++i)
      out.cuda.push_back(
          state_of(at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(i)))));
  }
  return out;
}

void restore_rng_states(const RngStates& states) {
  set_state(at::detail::getDefaultCPUGenerator(), states.cpu, "CPU generator");
  if (!at::hasCUDA()) return;
  const size_t devices = at::getNumGPUs();
  TUPE_CHECK(states.cuda.size() == devices, "rng state: saved " << states.cuda.size()
                                                                << " CUDA generator states, this process sees "
                                                                << devices << " CUDA devices");
  for (size_t i = 0; i < devices; ++i)
    set_state(at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(i))),
              states.cuda[i], "CUDA device " + std::to_string(i) + " generator");
}

}  // namespace tupe::trainer
