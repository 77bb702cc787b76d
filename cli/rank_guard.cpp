#include "cli/rank_guard.h"

#include <c10/util/Exception.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "dist/mpi_env.h"

namespace tupe::cli {

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
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
