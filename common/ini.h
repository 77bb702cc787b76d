// INI config files ([section] then key = value lines; # and ; comments), read with
// Boost.Program_options' config-file parser. Keys come back as "section.key".
#pragma once
#include <string>

#include "common/config_fields.h"

namespace tupe {

/// Reads `path`; throws tupe::Error "<path>: <cause>" when missing or malformed.
KeyValues read_ini(const std::string& path);

/// The entries of `kv` under "section." with the prefix removed.
KeyValues ini_section(const KeyValues& kv, const std::string& section);

/// Writes `kv` ("section.key" -> value) as an INI text, sections in order.
std::string format_ini(const KeyValues& kv);

}  // namespace tupe
