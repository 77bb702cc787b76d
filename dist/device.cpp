#include "dist/device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "common/config_fields.h"
#include "common/error.h"
#include "common/log.h"
#include "dist/check.h"
#include "dist/mpi_env.h"
#include "dist/startup.h"

#ifdef TUPE_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace tupe::dist {

DeviceRequest parse_device_request(const std::string& text, const std::string& key) {
  return parse_choice(key, text, kDeviceRequestWords);
}

std::string to_string(DeviceRequest request) { return choice_word(request, kDeviceRequestWords); }

int cuda_device_for_local_rank(int local_rank, int visible_devices) {
  TUPE_CHECK(visible_devices >= 1, "device: no CUDA device is visible to this process");
  TUPE_CHECK(local_rank >= 0, "device: local rank " << local_rank << " is negative");
  return local_rank % visible_devices;
}

std::string check_device_plan(const std::vector<RankDevice>& ranks, DeviceRequest request, const std::string& key) {
  std::ostringstream err;
  if (request == DeviceRequest::kCuda) {
    for (const RankDevice& r : ranks)
      if (r.visible_devices < 1) {
        err << key << ": cuda requested, but rank " << r.rank << " (host " << r.host
            << ") sees no CUDA device (CUDA_VISIBLE_DEVICES, driver, or a CPU-only LibTorch?)";
        return err.str();
      }
  }
  const RankDevice* gpu = nullptr;
  const RankDevice* cpu = nullptr;
  for (const RankDevice& r : ranks) {
    if (r.use_cuda && gpu == nullptr) gpu = &r;
    if (!r.use_cuda && cpu == nullptr) cpu = &r;
  }
  if (gpu && cpu) {
    err << key << ": ranks disagree on the device: rank " << gpu->rank << " (host " << gpu->host << ", "
        << gpu->visible_devices << " GPU(s) visible) would train on a GPU, rank " << cpu->rank << " (host "
        << cpu->host << ", " << cpu->visible_devices << " visible) on the CPU; set " << key << " to cpu or cuda";
    return err.str();
  }
  // Two ranks of one host on one physical GPU.
  std::map<std::pair<std::string, std::string>, const RankDevice*> owner;  // (host, gpu) -> first rank
  for (const RankDevice& r : ranks) {
    if (!r.use_cuda) continue;
    const std::string gpu_key = r.gpu_uuid.empty() ? "cuda:" + std::to_string(r.device_index) : r.gpu_uuid;
    auto [it, fresh] = owner.emplace(std::make_pair(r.host, gpu_key), &r);
    if (fresh) continue;
    const RankDevice& first = *it->second;
    err << key << ": ranks " << first.rank << " and " << r.rank << " on host " << r.host << " would share one GPU ("
        << gpu_key << ", cuda:" << r.device_index << " of " << r.visible_devices << " visible): " << r.local_world_size
        << " ranks on this node but " << r.visible_devices
        << " GPU(s) visible to each; start one rank per GPU (launch/tupe-mpirun, or srun --gpus-per-task=1), or "
           "fewer ranks per node";
    return err.str();
  }
  return "";
}

namespace {

/// One rank's record as fixed-size bytes for MPI_Allgather (its host: MpiEnv::hosts(), gathered at start-up).
struct WireRecord {
  int32_t local_rank, local_world_size, visible_devices, use_cuda, device_index;
  char gpu_uuid[64];
};

void copy_text(char* dst, size_t n, const std::string& src) {
  std::memset(dst, 0, n);
  std::memcpy(dst, src.data(), std::min(n - 1, src.size()));
}

}  // namespace

std::string placement_line(const std::vector<RankDevice>& ranks) {
  std::vector<std::pair<std::string, std::vector<int>>> hosts;  // in order of first rank
  for (const RankDevice& d : ranks) {
    auto it = std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h.first == d.host; });
    if (it == hosts.end()) it = hosts.insert(hosts.end(), {d.host, {}});
    it->second.push_back(d.rank);
  }
  std::ostringstream out;
  out << "placement:";
  for (size_t h = 0; h < hosts.size(); ++h) {
    std::vector<int> r = hosts[h].second;
    std::sort(r.begin(), r.end());
    out << (h ? "; " : " ") << hosts[h].first << " ranks ";
    for (size_t i = 0; i < r.size();) {
      size_t j = i;
      while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
      out << (i ? "," : "") << r[i];
      if (j > i) out << "-" << r[j];
      i = j + 1;
    }
  }
  out << " (" << ranks.size() << (ranks.size() == 1 ? " rank on " : " ranks on ") << hosts.size()
      << (hosts.size() == 1 ? " node)" : " nodes)");
  return out.str();
}

c10::Device resolve_device(const MpiEnv& env, DeviceRequest request, const std::string& key) {
  const int visible = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  const bool use_cuda = request == DeviceRequest::kCuda || (request == DeviceRequest::kAuto && visible > 0);
  WireRecord mine{};
  mine.local_rank = env.local_rank();
  mine.local_world_size = env.local_world_size();
  mine.visible_devices = visible;
  mine.use_cuda = use_cuda ? 1 : 0;
  mine.device_index = use_cuda && visible > 0 ? cuda_device_for_local_rank(env.local_rank(), visible) : -1;
  copy_text(mine.gpu_uuid, sizeof(mine.gpu_uuid), mine.device_index >= 0 ? cuda_device_uuid(mine.device_index) : "");

  std::vector<WireRecord> all(static_cast<size_t>(env.world_size()));
  {
    const StartupPhase bounded(env, "placement");
    auto mpi = env.lock();
    TUPE_MPI_CHECK(MPI_Allgather(&mine, sizeof(WireRecord), MPI_BYTE, all.data(), sizeof(WireRecord), MPI_BYTE,
                                 MPI_COMM_WORLD));
  }
  std::vector<RankDevice> ranks;
  for (size_t r = 0; r < all.size(); ++r) {
    const WireRecord& w = all[r];
    RankDevice d;
    d.rank = static_cast<int>(r);
    d.host = env.hosts()[r];
    d.local_rank = w.local_rank;
    d.local_world_size = w.local_world_size;
    d.visible_devices = w.visible_devices;
    d.use_cuda = w.use_cuda != 0;
    d.device_index = w.device_index;
    d.gpu_uuid = std::string(w.gpu_uuid, strnlen(w.gpu_uuid, sizeof(w.gpu_uuid)));
    ranks.push_back(std::move(d));
  }
  const std::string error = check_device_plan(ranks, request, key);
  TUPE_CHECK(error.empty(), error);
  if (env.world_size() > 1) log::info(placement_line(ranks));
  if (!use_cuda) return c10::Device(c10::kCPU);
  const c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(mine.device_index));
  set_current_device(device);
  return device;
}

void set_current_device(const c10::Device& device) {
  if (!device.is_cuda()) return;
  c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(device);
}

std::string cuda_device_name(int index) {
#ifdef TUPE_HAVE_NCCL
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "";
  return std::string(prop.name, strnlen(prop.name, sizeof(prop.name)));
#else
  (void)index;
  return "";
#endif
}

bool cuda_bf16_supported(int index) {
#ifdef TUPE_HAVE_NCCL
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return false;
  return prop.major >= 8;
#else
  (void)index;
  return false;
#endif
}

std::string cuda_device_uuid(int index) {
#ifdef TUPE_HAVE_NCCL
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "";
  static const char* hex = "0123456789abcdef";
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    const auto b = static_cast<unsigned char>(prop.uuid.bytes[i]);
    out += hex[b >> 4];
    out += hex[b & 15];
    if (i == 3 || i == 5 || i == 7 || i == 9) out += '-';
  }
  return out;
#else
  (void)index;
  return "";
#endif
}

}  // namespace tupe::dist
