// The fixed checkpoint files of fuzz_manifest: a tiny model.safetensors, an empty
// optimizer.safetensors and a valid trainer_state.json for step 1. The seed manifests in
// fuzz/corpus/manifest/ list these files' sizes and SHA-256s (fuzz/make_seeds.py builds the
// same bytes); keep both in step.
#pragma once
#include <cstdint>
#include <string>

namespace tupe_fuzz {

/// A safetensors file: the 8-byte little-endian header length, the header padded with
/// spaces to a multiple of 8, then `data`.
inline std::string safetensors_bytes(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xff);
  return out + header + data;
}

inline std::string fixture_model() {
  // F32 [2] = {1.0f, 2.0f}, little-endian.
  return safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                           std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8));
}

inline std::string fixture_optimizer() {
  return safetensors_bytes(R"({"__metadata__":{"kind":"adamw"}})", "");
}

inline std::string fixture_trainer_state() {
  return R"({
  "format": "tupe-trainer-state",
  "format_version": 1,
  "step": 1,
  "scheduler_step": 1,
  "world_size": 1,
  "vocab_sha256": "",
  "loss_scaler": {"scale": 65536.0, "growth_tracker": 0, "consecutive_skips": 0, "total_skips": 0},
  "data_position": {"epoch": 0, "consumed_samples": 8},
  "rng": {"cpu": "00ff", "cuda": []},
  "config": {"model.hidden_size": "64"}
}
)";
}

}  // namespace tupe_fuzz
