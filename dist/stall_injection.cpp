#include "dist/stall_injection.h"

#include <csignal>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "common/config_fields.h"
#include "common/error.h"

namespace tupe::dist {

StallInjection parse_stall_injection(const std::string& text) {
  StallInjection s;
  if (text.empty()) return s;
  bool has_rank = false;
  for (size_t at = 0; at <= text.size();) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    at = end + 1;
    const size_t eq = item.find('=');
    TUPE_CHECK(eq != std::string::npos,
               kStallInjectionEnv << ": '" << item << "' is not key=value (in '" << text << "')");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    try {
      if (key == "rank") {
        s.rank = parse_int(key, value);
        has_rank = true;
      } else if (key == "step") {
        s.step = parse_int(key, value);
      } else if (key == "seconds") {
        s.seconds = parse_double(key, value);
      } else if (key == "freeze") {
        s.freeze = parse_int(key, value) != 0;
      } else if (key == "marker") {
        s.marker = value;
      } else if (key == "phase") {
        TUPE_CHECK(!value.empty(), "phase: empty");
        s.phase = value;
      } else {
        TUPE_FAIL("unknown key '" << key << "' (expected rank, step, seconds, phase, freeze, marker)");
      }
    } catch (const Error& e) {
      TUPE_FAIL(kStallInjectionEnv << ": " << e.what());
    }
  }
  TUPE_CHECK(has_rank && s.rank >= 0, kStallInjectionEnv << ": needs rank=R with R >= 0, got '" << text << "'");
  TUPE_CHECK(s.step >= -1, kStallInjectionEnv << ": step must be >= 0 (or -1: any), got " << s.step);
  TUPE_CHECK(s.seconds >= 0, kStallInjectionEnv << ": seconds must be >= 0, got " << s.seconds);
  return s;
}

StallInjection stall_injection_from_env() {
  const char* text = std::getenv(kStallInjectionEnv);
  return parse_stall_injection(text == nullptr ? "" : text);
}

void sleep_for_stall(const StallInjection& s, const std::string& where) {
  if (!s.marker.empty()) std::ofstream(s.marker) << where << "\n";
  if (s.freeze) {
    ::raise(SIGSTOP);
    return;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(s.seconds));
}

}  // namespace tupe::dist
