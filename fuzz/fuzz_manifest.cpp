// Fuzz target for the checkpoint manifest: validate_manifest() in checkpoint/checkpoint_store.cpp,
// reached through tupe::checkpoint::CheckpointStore::load(folder) (the manifest parser is
// file-local). Each input is written as manifest.json into a /dev/shm folder named
// step_00000001 that holds fixed, valid model.safetensors, optimizer.safetensors and
// trainer_state.json (fuzz_checkpoint_fixture.h); a manifest that passes goes on to the
// SHA-256 checks and the loading of those files. Expected on bad input: tupe::Error (or
// c10::Error). A finding is anything else: a crash or sanitizer report, another exception
// type escaping load() (e.g. nlohmann::json::type_error, std::filesystem::filesystem_error),
// a hang or a huge allocation, or a load that returns a step other than the folder's.
#include <c10/util/Exception.h>

#include <cstdint>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_store.h"
#include "common/error.h"
#include "fuzz/fuzz_checkpoint_fixture.h"
#include "fuzz/fuzz_refusal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = [] {
    const auto d = tupe_fuzz::scratch_dir("manifest") / "step_00000001";
    std::filesystem::create_directories(d);
    const std::string model = tupe_fuzz::fixture_model(), optimizer = tupe_fuzz::fixture_optimizer(),
                      state = tupe_fuzz::fixture_trainer_state();
    tupe_fuzz::write_file(d / "model.safetensors", model.data(), model.size());
    tupe_fuzz::write_file(d / "optimizer.safetensors", optimizer.data(), optimizer.size());
    tupe_fuzz::write_file(d / "trainer_state.json", state.data(), state.size());
    return d;
  }();
  tupe_fuzz::write_file(dir / "manifest.json", data, size);
  tupe_fuzz::parse_or_refuse([&] {
    const auto contents = tupe::checkpoint::CheckpointStore::load(dir);
    if (contents.state.step != 1) tupe_fuzz::fail("load() returned step " + std::to_string(contents.state.step));
  });
  return 0;
}
