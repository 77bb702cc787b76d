// Random-number generator states of this process, for exact resume: the default CPU
// generator (mt19937 + normal cache, 5056 bytes in LibTorch 2.x) and, when CUDA is
// available, each visible device's default Philox generator (seed + offset).
#pragma once
#include <cstdint>
#include <vector>

namespace tupe::trainer {

struct RngStates {
  std::vector<uint8_t> cpu;                ///< at::Generator::get_state() bytes of the CPU generator
  std::vector<std::vector<uint8_t>> cuda;  ///< per visible CUDA device, in device order; empty without CUDA
};

/// The current states (no side effects on the generators).
RngStates capture_rng_states();

/// Restores the CPU generator and, when this process has CUDA, each device's generator.
/// Throws tupe::Error when the CPU state is malformed, or when this process has CUDA and
/// the number of saved device states differs from the visible devices. Without CUDA in
/// this process, saved CUDA states are not applied (there is no device generator to feed).
void restore_rng_states(const RngStates& states);

}  // namespace tupe::trainer
