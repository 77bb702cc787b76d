// Liveness after start-up: a heartbeat per rank on its own thread, so that every wait on the
// other ranks (a preprocess's commit, a verification's verdicts, a fine-tuning's evaluation,
// a barrier around a checkpoint) tells "slow" from "gone".
//
// Start-up phases are bounded by their deadline (dist/startup.h) and pre-training's
// collectives by the watchdog (dist/watchdog.h); past start-up, a rank may legitimately work
// for a long time (a big piece to tokenise) while the others wait for it, so no deadline on the
// wait itself can be right. Instead each process runs a thread that, every period
// (timeout / 10, between 0.2 s and 2 s):
//   - sends a one-number beat: every rank to rank 0, rank 0 to every rank (a hub: 2 (W - 1)
//     messages a period), on its own duplicate of MPI_COMM_WORLD;
//   - takes the beats that came (one posted receive per peer);
//   - rank 0: a rank whose last beat is older than the timeout ends the job with
//       "tupe: preprocess: heartbeat: rank 2 (node2) sent none for 10 s (a stopped, frozen or
//        lost node?) while rank 0 (node1) was <activity>; ending the job
//        (TUPE_HEARTBEAT_TIMEOUT_S = 10)";
//   - the other ranks: rank 0 silent for the timeout + 10 s (so that rank 0's line comes first
//     when rank 0 is alive) ends the job naming rank 0.
// The thread beats while the main thread computes or waits in a collective, so a working rank
// is never taken for a lost one; a stopped or dead process stops beating.
// Used by preprocess, verify and evaluate, whose waits past start-up nothing else bounds.
// Pre-training and fine-tuning do not start it: their step collectives are the watchdog's
// (dist/watchdog.h), and under srun a node killed mid-collective made a rank crash inside Open
// MPI while the heartbeat thread called it from a second thread (cluster_slurm_node_down). The job ends through
// MpiEnv::abort (MPI_Abort; the launcher stops every rank, the stopped ones with SIGKILL).
// Under MPI_THREAD_SERIALIZED every MPI call holds MpiEnv::lock(), which the main thread never
// holds while it waits.
#pragma once
#include <memory>
#include <string>

#include "dist/mpi_env.h"

namespace tupe::dist {

/// The environment variable of the heartbeat timeout (seconds; 0 = off) and its default.
inline constexpr const char* kHeartbeatTimeoutEnv = "TUPE_HEARTBEAT_TIMEOUT_S";
inline constexpr double kDefaultHeartbeatTimeout_s = 60.0;

/// $TUPE_HEARTBEAT_TIMEOUT_S (seconds >= 0; 0 turns the heartbeat off), default 60. Throws
/// tupe::Error naming the variable for a value that is not such a number.
double heartbeat_timeout_from_env();

/// One process's heartbeat (RAII). Construct it on every rank at the same point (it duplicates
/// MPI_COMM_WORLD: a collective), after start-up's agreement on the config; destroy it before
/// the MpiEnv. A no-op on one rank or with timeout_s <= 0. Throws tupe::Error on an MPI error.
class Heartbeat {
 public:
  /// `command` names the job in the line ("tupe preprocess").
  Heartbeat(const MpiEnv& env, double timeout_s, std::string command);
  /// Stops the thread; the posted receives are cancelled.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  /// What this rank is doing now, as rank 0's line names it ("writing its shards", "waiting
  /// for the other ranks in 'commit'"). Thread-safe.
  void set_activity(const std::string& activity);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// Every rank: reads $TUPE_HEARTBEAT_TIMEOUT_S (a bad value ends the job on every rank with
/// one line: tupe::AgreedError) and starts the heartbeat for `command` ("tupe finetune").
std::unique_ptr<Heartbeat> start_heartbeat(const MpiEnv& env, const std::string& command);

}  // namespace tupe::dist
