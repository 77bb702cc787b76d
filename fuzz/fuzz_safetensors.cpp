// Fuzz target for the safetensors reader: tupe::checkpoint::read_safetensors(path)
// (checkpoint/safetensors.cpp: 8-byte header length, JSON header, tensor data). Each input is
// written to /dev/shm and read. Expected on bad input: tupe::Error (or c10::Error from a
// torch-level check). A finding is anything else: a crash or sanitizer report, another
// exception type (e.g. nlohmann::json::type_error), a hang, a huge allocation (over
// -rss_limit_mb / -malloc_limit_mb), or a result whose tensors disagree with the file.
#include <c10/util/Exception.h>

#include <cstdint>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "fuzz/fuzz_refusal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path path = tupe_fuzz::scratch_dir("safetensors") / "model.safetensors";
  tupe_fuzz::write_file(path, data, size);
  tupe_fuzz::parse_or_refuse([&] {
    const auto contents = tupe::checkpoint::read_safetensors(path);
    uint64_t bytes = 0;
    for (const auto& [name, t] : contents.tensors) {
      if (!t.is_contiguous() || t.device().type() != c10::DeviceType::CPU) tupe_fuzz::fail("tensor '" + name + "' not contiguous on the CPU");
      bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
    }
    if (bytes > size) tupe_fuzz::fail("tensors hold more bytes than the file");
  });
  return 0;
}
