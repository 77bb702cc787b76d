// Fuzz target for the INI reader: tupe::read_ini(path) (common/ini.cpp; Boost.Program_options'
// config-file parser behind a BOM strip and a NUL-byte check). Each input is written to
// /dev/shm and read as a config file. Expected on bad input: tupe::Error. A finding is
// anything else: a crash or sanitizer report, another exception type escaping (e.g. a Boost
// exception that is not boost::program_options::error), a hang, a huge allocation, or a
// result that breaks read_ini's contract (a key without a "section." prefix).
#include <cstdint>
#include <string_view>

#include "common/error.h"
#include "common/ini.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path path = tupe_fuzz::scratch_dir("ini") / "config.ini";
  tupe_fuzz::write_file(path, data, size);
  try {
    const tupe::KeyValues kv = tupe::read_ini(path.string());
    for (const auto& [key, value] : kv)
      if (key.find('.') == std::string::npos) tupe_fuzz::fail("read_ini returned key '" + key + "' without a section");
    (void)tupe::ini_section(kv, "model");
    (void)tupe::format_ini(kv);
    tupe_fuzz::note("accepted");
  } catch (const tupe::Error& e) {
    tupe_fuzz::note(e.what());
  }
  return 0;
}
