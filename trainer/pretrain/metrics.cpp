#include "trainer/pretrain/metrics.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common/error.h"
#include "common/log.h"

namespace tupe::pretrain {

namespace {

/// Rewrites the JSONL at `path` without the records whose "step" is above `step` and without
/// lines that do not parse (a record cut short by a crash); write to a temporary, then rename.
void drop_records_after(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::string line, kept;
  bool dropped = false;
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded() || !r.is_object() || (r.contains("step") && r["step"].is_number_integer() &&
                                                r["step"].get<int64_t>() > step)) {
      dropped = true;
      continue;
    }
    kept += line + '\n';
  }
  if (!dropped) return;
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << kept;
    out.flush();
    TUPE_CHECK(out.good(), temp << ": cannot write the metrics file's kept records");
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  TUPE_CHECK(!ec, path << ": cannot replace with its kept records: " << ec.message());
}

}  // namespace

MetricsLog::MetricsLog(const std::string& dir, int rank, std::unique_ptr<metrics::EventFileWriter> tensorboard,
                       int64_t resumed_at)
    : tensorboard_(std::move(tensorboard)) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  path_ = (std::filesystem::path(dir) / ("rank_" + std::to_string(rank) + ".jsonl")).string();
  if (resumed_at >= 0) drop_records_after(path_, resumed_at);
  out_.open(path_, std::ios::app);
  TUPE_CHECK(out_.good(), path_ << ": cannot open metrics file for writing");
}

void MetricsLog::write(const nlohmann::json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
  if (tensorboard_ && record.contains("step")) {
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    tensorboard_->write_scalars(record.at("step").get<int64_t>(), now, metrics::scalars_of_record(record, "train"));
  }
}

namespace {

/// TUPE_PROGRESS=tty | lines forces the mode; unset or empty: tty on a real terminal.
bool rewrite_in_place() {
  const char* v = std::getenv("TUPE_PROGRESS");
  if (v == nullptr || *v == '\0') return isatty(STDOUT_FILENO) != 0 && !log::started_by_launcher();
  const std::string mode(v);
  TUPE_CHECK(
      mode == "tty" || mode == "lines",
      "TUPE_PROGRESS: unknown value '" << mode << "' (tty = rewrite one line in place, lines = one line per log step)");
  return mode == "tty";
}

}  // namespace

Progress::Progress(bool lines) : lines_(lines), tty_(lines && rewrite_in_place()) {}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  const auto t = static_cast<int64_t>(s);
  if (t >= 3600)
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(t / 3600),
                  static_cast<long long>(t % 3600 / 60));
  else if (t >= 60)
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(t));
  return buf;
}

void Progress::update(const ProgressLine& p) {
  if (!lines_ || !log::enabled(log::Level::kInfo)) return;
  char line[256];
  int n = std::snprintf(line, sizeof(line), "step %lld/%lld | loss %.4f | lr %.3e | gnorm %.3f | scale %g | %.0f tok/s",
                        static_cast<long long>(p.step), static_cast<long long>(p.max_steps), p.loss, p.lr, p.grad_norm,
                        p.loss_scale, p.tokens_per_s);
  if (p.mfu >= 0 && n > 0 && n < static_cast<int>(sizeof(line)))
    n += std::snprintf(line + n, sizeof(line) - n, " | MFU %.1f%%", 100.0 * p.mfu);
  if (p.skipped > 0 && n > 0 && n < static_cast<int>(sizeof(line)))
    n += std::snprintf(line + n, sizeof(line) - n, " | skipped %lld", static_cast<long long>(p.skipped));
  std::string text = std::string(line) + " | ETA " + format_duration(p.eta_s);
  if (tty_) {
    std::cout << "\r\033[K" << text << std::flush;
    open_line_ = true;
  } else {
    log::info(text);
  }
}

void Progress::message(const std::string& text) {
  if (!log::enabled(log::Level::kInfo)) return;
  if (open_line_) std::cout << "\n" << std::flush;
  open_line_ = false;
  log::info(text);
}

}  // namespace tupe::pretrain
