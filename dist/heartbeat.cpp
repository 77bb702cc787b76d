// Liveness after start-up (heartbeat.h has the protocol).
#include "dist/heartbeat.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "common/config_fields.h"
#include "common/error.h"
#include "common/log.h"
#include "dist/check.h"
#include "dist/small_collectives.h"
#include "dist/startup.h"

namespace tupe::dist {

namespace {
using Clock = std::chrono::steady_clock;

std::string seconds_text(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}
}  // namespace

double heartbeat_timeout_from_env() {
  const char* text = std::getenv(kHeartbeatTimeoutEnv);
  if (text == nullptr || *text == '\0') return kDefaultHeartbeatTimeout_s;
  double s = -1;
  try {
    s = parse_double(kHeartbeatTimeoutEnv, text);
  } catch (const Error&) {
    s = -1;  // said below, in one line
  }
  TUPE_CHECK(s >= 0, kHeartbeatTimeoutEnv << ": expected seconds >= 0 (0: off), got '" << text << "'");
  return s;
}

/// The thread and its MPI state. Peers: rank 0 has W - 1 (ranks 1..W-1), the others one (0).
struct Heartbeat::State {
  const MpiEnv& env;
  const double timeout_s;
  const std::string command;
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> peers;
  std::vector<int64_t> recv_value, send_value;
  std::vector<MPI_Request> recvs, sends;
  std::vector<Clock::time_point> last_heard;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::string activity = "working";
  std::thread thread;

  State(const MpiEnv& e, double t, std::string c) : env(e), timeout_s(t), command(std::move(c)) {}

  std::string host_of(int r) const {
    const auto& hosts = env.hosts();
    return r >= 0 && static_cast<size_t>(r) < hosts.size() ? hosts[static_cast<size_t>(r)] : "?";
  }

  void post_receive(size_t i) {
    auto lock = env.lock();
    TUPE_MPI_CHECK(MPI_Irecv(&recv_value[i], 1, MPI_INT64_T, peers[i], 0, comm, &recvs[i]));
  }

  /// One period: beats out, beats in, the silent peers judged.
  void beat(int64_t sequence) {
    const auto now = Clock::now();
    for (size_t i = 0; i < peers.size(); ++i) {
      int done = 1;
      auto lock = env.lock();
      if (sends[i] != MPI_REQUEST_NULL) TUPE_MPI_CHECK(MPI_Test(&sends[i], &done, MPI_STATUS_IGNORE));
      if (!done) continue;  // the peer does not take them: a stopped process fills its buffers
      send_value[i] = sequence;
      TUPE_MPI_CHECK(MPI_Isend(&send_value[i], 1, MPI_INT64_T, peers[i], 0, comm, &sends[i]));
    }
    for (size_t i = 0; i < peers.size(); ++i) {
      for (;;) {  // every beat that came since the last period
        int done = 0;
        {
          auto lock = env.lock();
          TUPE_MPI_CHECK(MPI_Test(&recvs[i], &done, MPI_STATUS_IGNORE));
        }
        if (!done) break;
        last_heard[i] = now;
        post_receive(i);
      }
    }
    // Rank 0 judges every rank; the others judge rank 0, later (rank 0's line first).
    const double limit_s = env.rank() == 0 ? timeout_s : timeout_s + kStartupGraceNonRoot_s;
    for (size_t i = 0; i < peers.size(); ++i) {
      const double silent_s = std::chrono::duration<double>(now - last_heard[i]).count();
      if (silent_s <= limit_s) continue;
      std::string doing;
      {
        std::lock_guard<std::mutex> lk(mu);
        doing = activity;
      }
      std::vector<int> silent;
      for (size_t j = 0; j < peers.size(); ++j)
        if (std::chrono::duration<double>(now - last_heard[j]).count() > limit_s) silent.push_back(peers[j]);
      // MpiEnv::abort prints "tupe: <message>": "tupe: preprocess: heartbeat: ...".
      const std::string sub = command.rfind("tupe ", 0) == 0 ? command.substr(5) : command;
      env.abort(sub + ": heartbeat: " + describe_ranks(silent, env.hosts()) + " sent none for " +
                seconds_text(static_cast<double>(static_cast<int64_t>(silent_s))) +
                " s (a stopped, frozen or lost node?) while rank " + std::to_string(env.rank()) + " (" +
                host_of(env.rank()) + ") was " + doing + "; ending the job (" + kHeartbeatTimeoutEnv + " = " +
                seconds_text(timeout_s) + ")");
    }
  }

  void run() {
    const double period_s = std::clamp(timeout_s / 10, 0.2, 2.0);
    const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(period_s));
    int64_t sequence = 0;
    std::unique_lock<std::mutex> lk(mu);
    while (!stop) {
      lk.unlock();
      try {
        beat(++sequence);
      } catch (const Error& e) {  // an MPI error on the heartbeat's own communicator
        log::warn(command + ": heartbeat stopped: " + e.what());
        lk.lock();
        return;
      }
      lk.lock();
      cv.wait_for(lk, period, [this] { return stop; });
    }
  }
};

Heartbeat::Heartbeat(const MpiEnv& env, double timeout_s, std::string command) {
  if (env.world_size() == 1 || timeout_s <= 0) return;
  state_ = std::make_unique<State>(env, timeout_s, std::move(command));
  State& s = *state_;
  {
    auto lock = env.lock();
    TUPE_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &s.comm));
    TUPE_MPI_CHECK(MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN));
  }
  if (env.rank() == 0)
    for (int r = 1; r < env.world_size(); ++r) s.peers.push_back(r);
  else
    s.peers.push_back(0);
  const size_t n = s.peers.size();
  s.recv_value.assign(n, 0);
  s.send_value.assign(n, 0);
  s.recvs.assign(n, MPI_REQUEST_NULL);
  s.sends.assign(n, MPI_REQUEST_NULL);
  s.last_heard.assign(n, Clock::now());
  for (size_t i = 0; i < n; ++i) s.post_receive(i);
  s.thread = std::thread([&s] { s.run(); });
}

Heartbeat::~Heartbeat() {
  if (!state_) return;
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.stop = true;
  }
  s.cv.notify_all();
  s.thread.join();
  // Posted receives are cancelled (a local act); beats still in flight to a peer are freed
  // (eager one-number sends complete without the receiver). The communicator is left to
  // MPI_Finalize: freeing it would be a collective among ranks that end at different times.
  auto lock = s.env.lock();
  for (MPI_Request& r : s.recvs)
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  for (MPI_Request& r : s.sends)
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
}

void Heartbeat::set_activity(const std::string& activity) {
  if (!state_) return;
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->activity = activity;
}

std::unique_ptr<Heartbeat> start_heartbeat(const MpiEnv& env, const std::string& command) {
  double timeout_s = 0;
  std::string error;
  try {
    timeout_s = heartbeat_timeout_from_env();
  } catch (const Error& e) {
    error = e.what();
  }
  error = first_error(env, error, "heartbeat settings");
  if (!error.empty()) throw AgreedError(error);
  return std::make_unique<Heartbeat>(env, timeout_s, command);
}

}  // namespace tupe::dist
