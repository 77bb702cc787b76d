// Fuzz target for trainer_state.json: tupe::checkpoint::trainer_state_from_json(text, where)
// (checkpoint/trainer_state.cpp). Each input is the JSON text. Expected on bad input:
// tupe::Error. A finding is anything else: a crash or sanitizer report, another exception
// type (e.g. nlohmann::json::type_error), a hang, a huge allocation; or an accepted state
// that does not survive its own round trip (trainer_state_to_json, then
// trainer_state_from_json again, must succeed with the same values), since
// CheckpointStore::save() refuses to write a state that fails that round trip.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/trainer_state.h"
#include "common/error.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tupe::checkpoint::TrainerState s;
  try {
    s = tupe::checkpoint::trainer_state_from_json(text, "trainer_state.json");
  } catch (const tupe::Error& e) {
    tupe_fuzz::note(e.what());
    return 0;
    return 0;
  }
  const std::string again = tupe::checkpoint::trainer_state_to_json(s);
  try {
    const auto r = tupe::checkpoint::trainer_state_from_json(again, "round trip");
    const bool same = r.step == s.step && r.scheduler_step == s.scheduler_step && r.world_size == s.world_size &&
                      r.vocab_sha256 == s.vocab_sha256 && r.loss_scaler.scale == s.loss_scaler.scale &&
                      r.loss_scaler.growth_tracker == s.loss_scaler.growth_tracker &&
                      r.loss_scaler.consecutive_skips == s.loss_scaler.consecutive_skips &&
                      r.loss_scaler.total_skips == s.loss_scaler.total_skips && r.data.epoch == s.data.epoch &&
                      r.data.consumed_samples == s.data.consumed_samples &&
                      r.config == s.config;
    if (!same) tupe_fuzz::fail("trainer state differs after to_json/from_json");
    tupe_fuzz::note("accepted");
  } catch (const tupe::Error& e) {
    tupe_fuzz::fail(std::string("an accepted trainer state fails its own round trip: ") + e.what());
  }
  return 0;
}
