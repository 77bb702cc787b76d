// All-reduce benchmark over the tupe communicator (nccl-tests style, run by hand):
//   mpirun -np 2 build-x/dist/allreduce_bench --backend mpi --min_bytes 1024 --max_bytes 64M
// For each message size (min..max, x step_factor): warm up, barrier, time `iters`
// back-to-back all-reduces (each waited), average the per-rank time over ranks, and print
//   algbw = bytes / time (GB/s, 1e9)   busbw = algbw * 2 (n - 1) / n   (nccl-tests PERFORMANCE.md)
// plus a #wrong column: one extra all-reduce on inputs generated from (seed, rank, index)
// whose sum is known in closed form; the exit code is non-zero when any element is wrong.
// At world size 1 an in-place sum moves no bytes (NCCL launches no reduction kernel for one
// rank), so a bandwidth would only be bytes over host overhead (above the memory's own
// bandwidth for large sizes): the rows then give microseconds per call only, the algbw and
// busbw columns read "-", and the header line says so; the data check is trivial there.
#include <ATen/ATen.h>
#include <mpi.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "common/error.h"
#include "dist/communicator.h"
#include "dist/device.h"
#include "dist/make_communicator.h"
#include "dist/mpi_env.h"
#include "dist/options.h"

namespace po = boost::program_options;
using tupe::dist::Communicator;

namespace {

/// "64M" / "1K" / "4096" -> bytes.
int64_t parse_bytes(const std::string& key, const std::string& text) {
  TUPE_CHECK(!text.empty(), "--" << key << ": empty size");
  int64_t scale = 1;
  std::string digits = text;
  const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
  if (unit == 'K' || unit == 'M' || unit == 'G') {
    scale = unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1024 * 1024 * 1024;
    digits.pop_back();
  }
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(digits, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TUPE_CHECK(used == digits.size() && value > 0, "--" << key << ": expected a positive size like 4096, 1K, 64M, got '"
                                                      << text << "'");
  return value * scale;
}

at::ScalarType parse_dtype(const std::string& t) {
  if (t == "fp32") return at::kFloat;
  if (t == "fp64") return at::kDouble;
  if (t == "bf16") return at::kBFloat16;
  TUPE_FAIL("--dtype: expected fp32, fp64 or bf16, got '" << t << "'");
}

/// Input of rank r at element i: (r + 1) * v_i with v_i = (7 i + seed) mod 5 - 2, so the
/// sum over ranks is v_i * n (n + 1) / 2 -- small integers, exact in every dtype here.
at::Tensor pattern(int64_t numel, int64_t seed, int64_t factor, at::ScalarType dtype) {
  return at::arange(numel, at::kLong).mul(7).add(seed).remainder(5).sub(2).mul(factor).to(dtype);
}

struct Row {
  double time_us = 0, algbw = 0, busbw = 0;
  int64_t wrong = 0;
};

Row run_size(Communicator& comm, int64_t numel, at::ScalarType dtype, const at::Device& device, int warmup, int iters) {
  const int n = comm.world_size();
  at::Tensor t = at::ones({numel}, at::TensorOptions().dtype(dtype).device(device));
  const auto sync = [&] { (void)t.narrow(0, 0, 1).cpu(); };  // the copy waits for the current stream
  for (int i = 0; i < warmup; ++i) comm.all_reduce({t}, "bench warmup")->wait();
  comm.barrier("bench barrier")->wait();
  sync();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) comm.all_reduce({t}, "bench all_reduce")->wait();
  sync();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
  double sum_seconds = 0;
  MPI_Allreduce(&seconds, &sum_seconds, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  Row row;
  row.time_us = sum_seconds / n * 1e6;
  const double bytes = static_cast<double>(numel) * static_cast<double>(at::elementSize(dtype));
  if (n > 1) {  // at n = 1 no byte moves: no bandwidth (see the top of this file)
    row.algbw = bytes / (row.time_us * 1e-6) / 1e9;
    row.busbw = row.algbw * 2.0 * (n - 1) / n;
  }
  // Data check.
  const int64_t seed = 12345 + numel;
  at::Tensor x = pattern(numel, seed, comm.rank() + 1, dtype).to(device);
  comm.all_reduce({x}, "bench check")->wait();
  const at::Tensor expected = pattern(numel, seed, int64_t{n} * (n + 1) / 2, at::kDouble);
  const int64_t wrong = x.cpu().to(at::kDouble).ne(expected).sum().item<int64_t>();
  MPI_Allreduce(&wrong, &row.wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    tupe::dist::MpiEnv env(&argc, &argv);
    po::options_description desc("allreduce_bench options");
    desc.add_options()("help,h", "print this help")(
        "backend", po::value<std::string>()->default_value("auto"), "auto | mpi | nccl (auto: nccl with --device cuda)")(
        "device", po::value<std::string>()->default_value("cpu"), "cpu | cuda (cuda:<local rank mod visible GPUs>, dist/device.h)")(
        "dtype", po::value<std::string>()->default_value("fp32"), "fp32 | fp64 | bf16")(
        "min_bytes", po::value<std::string>()->default_value("1K"), "smallest message (bytes; K/M/G suffixes)")(
        "max_bytes", po::value<std::string>()->default_value("64M"), "largest message (bytes)")(
        "step_factor", po::value<int>()->default_value(4), "size multiplier between rows")(
        "warmup_iters", po::value<int>()->default_value(3), "untimed all-reduces per size")(
        "iters", po::value<int>()->default_value(20), "timed all-reduces per size");
    po::variables_map vm;
    try {
      po::store(po::parse_command_line(argc, argv, desc), vm);
      po::notify(vm);
    } catch (const po::error& e) {
      TUPE_FAIL("allreduce_bench: " << e.what());
    }
    if (vm.count("help")) {
      if (env.rank() == 0) std::cout << desc << "\n";
      return 0;
    }
    tupe::dist::DistOptions options;
    options.backend = tupe::dist::parse_backend(vm["backend"].as<std::string>());
    options.timeout_s = 0;
    const std::string device_text = vm["device"].as<std::string>();
    TUPE_CHECK(device_text == "cpu" || device_text == "cuda", "--device: expected cpu or cuda, got '" << device_text << "'");
    const at::Device device = tupe::dist::resolve_device(env, tupe::dist::parse_device_request(device_text, "--device"),
                                                         "--device");
    const at::ScalarType dtype = parse_dtype(vm["dtype"].as<std::string>());
    const int64_t min_bytes = parse_bytes("min_bytes", vm["min_bytes"].as<std::string>());
    const int64_t max_bytes = parse_bytes("max_bytes", vm["max_bytes"].as<std::string>());
    const int factor = vm["step_factor"].as<int>();
    const int warmup = vm["warmup_iters"].as<int>(), iters = vm["iters"].as<int>();
    TUPE_CHECK(factor >= 2 && iters >= 1 && warmup >= 0, "allreduce_bench: need step_factor >= 2, iters >= 1");

    int64_t total_wrong = 0;
    {
      auto comm = tupe::dist::make_communicator(env, options, nullptr, device);
      if (env.rank() == 0) {
        std::printf("# tupe allreduce_bench: backend %s, %d ranks, dtype %s, device %s, %d iters (+%d warmup)\n",
                    comm->backend_name(), env.world_size(), vm["dtype"].as<std::string>().c_str(),
                    device_text.c_str(), iters, warmup);
        if (env.world_size() == 1)
          std::printf("# world size 1: an in-place one-rank sum moves no bytes; time(us) is microseconds per call "
                      "(launch and host overhead), no bandwidth; the data check is trivial\n");
        std::printf("%14s %12s %12s %10s %10s %8s\n", "size(B)", "count(elts)", "time(us)", "algbw(GB/s)",
                    "busbw(GB/s)", "#wrong");
      }
      const int64_t element_bytes = static_cast<int64_t>(at::elementSize(dtype));
      for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
        const int64_t numel = std::max<int64_t>(1, bytes / element_bytes);
        const Row row = run_size(*comm, numel, dtype, device, warmup, iters);
        total_wrong += row.wrong;
        if (env.rank() == 0 && env.world_size() > 1)
          std::printf("%14lld %12lld %12.1f %10.3f %10.3f %8lld\n", static_cast<long long>(numel * element_bytes),
                      static_cast<long long>(numel), row.time_us, row.algbw, row.busbw,
                      static_cast<long long>(row.wrong));
        else if (env.rank() == 0)
          std::printf("%14lld %12lld %12.1f %10s %10s %8lld\n", static_cast<long long>(numel * element_bytes),
                      static_cast<long long>(numel), row.time_us, "-", "-", static_cast<long long>(row.wrong));
      }
    }
    if (env.rank() == 0) std::printf("# total wrong elements: %lld\n", static_cast<long long>(total_wrong));
    return total_wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "allreduce_bench: error: " << e.what() << "\n";
    return 1;
  }
}
