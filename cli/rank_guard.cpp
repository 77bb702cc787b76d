#include "cli/rank_guard.h"

#include <c10/util/Exception.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "dist/mpi_env.h"

namespace tupe::cli {

std::string one_line(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;  // a CRLF line break
    if (c == '\n') {
      out += ' ';
    } else if (c == '\r') {
      out += "\\r";  // a stray carriage return (a CRLF file's value) shown, not obeyed by the terminal
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

int run_job_on_ranks(const dist::MpiEnv& env, const std::string& command, const std::function<int()>& body) {
  if (env.world_size() == 1) return body();
  std::string message, kind = "error";
  int code = 1;
  try {
    return body();
  } catch (const AgreedError& e) {  // every rank knows and leaves: no abort needed
    if (env.rank() == 0) log::error(command, "error", one_line(e.what()), false);
    return 1;
  } catch (const Error& e) {
    message = e.what();
  } catch (const c10::Error& e) {
    message = e.what_without_backtrace();
    code = 3;
  } catch (const std::exception& e) {
    message = e.what();
    kind = "internal error";
    code = 3;
  }
  // The launcher stops the other ranks with SIGTERM, which pre-training catches to checkpoint
  // and stop at a step boundary: a failed rank has nothing to save, so SIGTERM ends it now.
  std::signal(SIGTERM, SIG_DFL);
  if (env.rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
  log::error(command, kind, one_line(message), true);
  env.abort("", code);
}

}  // namespace tupe::cli
