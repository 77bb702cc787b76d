#include "metrics/event_file.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/host_name.h"
#ifdef TUPE_HAVE_TENSORBOARD
#include "metrics/tensorboard_event.pb.h"
#endif

namespace tupe::metrics {
namespace {

constexpr uint32_t kCrcMaskDelta = 0xA282EAD8u;

[[maybe_unused]] void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace

bool tensorboard_built_in() {
#ifdef TUPE_HAVE_TENSORBOARD
  return true;
#else
  return false;
#endif
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(0, data, n);
  return ((c >> 15) | (c << 17)) + kCrcMaskDelta;
}

EventFileWriter::EventFileWriter(const std::string& dir) {
#ifndef TUPE_HAVE_TENSORBOARD
  throw Error(dir + ": this build writes no TensorBoard files (configured with TUPE_TENSORBOARD=OFF)");
#else
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create the TensorBoard folder: " + ec.message());
  const auto now = std::chrono::system_clock::now();
  const double wall = std::chrono::duration<double>(now.time_since_epoch()).count();
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(wall)) + "." +
                                         host_name() + "." + std::to_string(getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) throw Error(path_ + ": cannot create the event file: " + std::strerror(errno));
  tb::Event version;
  version.set_wall_time(wall);
  version.set_step(0);
  version.set_file_version("brain.Event:2");
  write_record(version.SerializeAsString());
  if (std::fflush(file_) != 0) throw Error(path_ + ": cannot write: " + std::strerror(errno));
#endif
}

EventFileWriter::~EventFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventFileWriter::write_record(const std::string& data) {
  std::string frame;
  frame.reserve(data.size() + 16);
  put_le(frame, data.size(), 8);
  put_le(frame, masked_crc32c(frame.data(), 8), 4);
  frame += data;
  put_le(frame, masked_crc32c(data.data(), data.size()), 4);
  if (std::fwrite(frame.data(), 1, frame.size(), file_) != frame.size())
    throw Error(path_ + ": cannot write: " + std::strerror(errno));
}

void EventFileWriter::write_scalars(int64_t step, double wall_time_s,
                                    const std::vector<std::pair<std::string, double>>& scalars) {
  if (scalars.empty()) return;
#ifdef TUPE_HAVE_TENSORBOARD
  tb::Event event;
  event.set_wall_time(wall_time_s);
  event.set_step(step);
  tb::Summary* summary = event.mutable_summary();
  for (const auto& [tag, value] : scalars) {
    tb::Summary::Value* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  write_record(event.SerializeAsString());
  if (std::fflush(file_) != 0) throw Error(path_ + ": cannot write: " + std::strerror(errno));
#endif
}

std::vector<std::pair<std::string, double>> scalars_of_record(const nlohmann::json& record,
                                                              const std::string& group) {
  std::vector<std::pair<std::string, double>> out;
  static constexpr std::string_view kValidation = "validation_";
  for (const auto& [key, value] : record.items()) {
    if (key == "step" || key == "epoch" || !value.is_number()) continue;
    if (key.compare(0, kValidation.size(), kValidation) == 0)
      out.emplace_back("validation/" + key.substr(kValidation.size()), value.get<double>());
    else
      out.emplace_back(group + "/" + key, value.get<double>());
  }
  return out;
}

}  // namespace tupe::metrics
