// For the harnesses whose parsers use LibTorch: one input's parse, where a refusal
// (tupe::Error, or c10::Error from a LibTorch check) is the expected outcome of bad input
// and anything else escapes to libFuzzer as a finding.
#pragma once
#include <c10/util/Exception.h>

#include "common/error.h"
#include "fuzz/fuzz_util.h"

namespace tupe_fuzz {

/// Runs `parse` (which checks what it accepted); notes "accepted" or the refusal's message.
template <class F>
void parse_or_refuse(F&& parse) {
  try {
    parse();
    note("accepted");
  } catch (const tupe::Error& e) {
    note(e.what());
  } catch (const c10::Error& e) {
    note(e.what());
  }
}

}  // namespace tupe_fuzz
