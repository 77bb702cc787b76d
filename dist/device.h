// Which device each rank computes on, decided once at start for the whole job.
//
// Rule: a rank that computes on a GPU takes CUDA device (local rank mod visible devices),
// where "local rank" is its rank among the ranks of its node (MPI_COMM_TYPE_SHARED) and
// "visible devices" what CUDA_VISIBLE_DEVICES leaves it. That covers both launch styles:
//  - one process sees every GPU of its node (mpirun, launch/tupe-mpirun): device = local rank;
//  - each process sees only its own GPU (srun --gpus-per-task=1): device 0 of what it sees.
// Two ranks of one node that land on the same physical GPU (same UUID) are an error (NCCL
// refuses them anyway, later and with a less helpful message), as are ranks that disagree
// on CPU versus GPU. Every rank sees the same verdict, so every rank
// throws the same error and none waits on a peer that stopped.
#pragma once
#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "common/config_fields.h"

namespace tupe::dist {

class MpiEnv;

/// What a config's `device` key asks for.
enum class DeviceRequest {
  kAuto,  ///< a GPU when this rank sees one, else the CPU
  kCpu,   ///< the CPU
  kCuda,  ///< a GPU; an error when none is visible
};
inline constexpr Choice<DeviceRequest> kDeviceRequestWords[] = {
    {"auto", DeviceRequest::kAuto}, {"cpu", DeviceRequest::kCpu}, {"cuda", DeviceRequest::kCuda}};
/// Parses auto | cpu | cuda; throws tupe::Error "<key>: expected auto, cpu or cuda, got '...'".
DeviceRequest parse_device_request(const std::string& text, const std::string& key);
/// "auto" | "cpu" | "cuda".
std::string to_string(DeviceRequest request);

/// The CUDA device index of a rank: local_rank mod visible_devices. Throws tupe::Error
/// when visible_devices < 1 or local_rank < 0.
int cuda_device_for_local_rank(int local_rank, int visible_devices);

/// What one rank saw and chose (one record per rank; gathered from all ranks).
struct RankDevice {
  int rank = 0;
  std::string host;         ///< MPI processor name: ranks with the same host share a node
  int local_rank = 0;       ///< rank among the node's ranks
  int local_world_size = 1; ///< ranks on this node
  int visible_devices = 0;  ///< CUDA devices this process sees (0: none, or no CUDA)
  bool use_cuda = false;    ///< this rank's choice under the request
  int device_index = -1;    ///< its CUDA device (use_cuda only)
  std::string gpu_uuid;     ///< that device's UUID ("" when unknown)
};

/// The job-wide check of all ranks' choices (pure, so testable without GPUs): returns ""
/// when the plan is sound, else the one-line error every rank throws. Errors: `cuda`
/// requested where a rank sees no GPU; ranks disagreeing on CPU versus GPU (auto on
/// mixed nodes); two ranks of one host on one GPU (same UUID, or same index when a UUID
/// is unknown). Messages start with `key` and name the ranks, hosts and counts involved.
std::string check_device_plan(const std::vector<RankDevice>& ranks, DeviceRequest request, const std::string& key);

/// Which ranks run on which node, as one line: "placement: node1 ranks 0-1; node2 ranks 2-3
/// (4 ranks on 2 nodes)" (hosts in order of their lowest rank; runs of ranks as a-b). Rank 0
/// logs it at start of every multi-rank job, so a launcher that sees a node fail can name the
/// ranks that were on it.
std::string placement_line(const std::vector<RankDevice>& ranks);

/// Decides this rank's device (collective: every rank calls it once, at start). On a GPU
/// it makes that device current for the calling thread. Throws tupe::Error with the text of
/// check_device_plan on every rank when the plan is not sound.
c10::Device resolve_device(const MpiEnv& env, DeviceRequest request, const std::string& key);

/// Makes `device` the current CUDA device of the calling thread (a no-op for the CPU). Call
/// it first in every thread that touches CUDA (loader threads that pin memory, the
/// watchdog), or CUDA opens a context on device 0 for that thread.
void set_current_device(const c10::Device& device);

/// The name of CUDA device `index` as CUDA reports it ("NVIDIA H200"); "" in builds without
/// the CUDA runtime or when it cannot be read.
std::string cuda_device_name(int index);

/// Whether CUDA device `index` computes in bfloat16 natively (compute capability 8.0 and later:
/// A100, H100, ...); false without CUDA or for an index it cannot read. trainer::resolve_precision
/// takes it for precision auto (bf16, else fp16).
bool cuda_bf16_supported(int index);

/// The UUID of CUDA device `index` as text ("GPU-xxxxxxxx-..."), "" in builds without the
/// CUDA runtime or when it cannot be read.
std::string cuda_device_uuid(int index);

}  // namespace tupe::dist
