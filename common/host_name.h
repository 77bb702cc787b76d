// This host's name, as temporary-file names, lock records and event files record it.
#pragma once
#include <unistd.h>

#include <climits>
#include <string>

namespace tupe {

/// gethostname(), "localhost" when it fails or is empty.
inline std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

}  // namespace tupe
