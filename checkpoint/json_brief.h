// Untrusted JSON values (checkpoint manifests, trainer state, safetensors headers) in error
// messages. json::dump() recurses, so a value nested thousands deep (a damaged or crafted
// file) would overflow the stack while the error is being built; a structured value is
// named by its type and size instead, a scalar is dumped (invalid UTF-8 replaced) and cut.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace tupe::checkpoint {

/// "array of 3 entries" / "object of 2 entries" / the dumped scalar, at most 80 characters.
/// J: nlohmann::json or nlohmann::ordered_json.
template <class J>
std::string json_brief(const J& v) {
  if (v.is_structured()) return std::string(v.type_name()) + " of " + std::to_string(v.size()) + " entries";
  std::string s = v.dump(-1, ' ', false, J::error_handler_t::replace);
  return s.size() <= 80 ? s : s.substr(0, 77) + "...";
}

}  // namespace tupe::checkpoint
