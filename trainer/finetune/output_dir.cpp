#include "trainer/finetune/output_dir.h"

#include "common/error.h"

namespace tupe::finetune {

namespace fs = std::filesystem;

const std::vector<std::string>& finetune_output_names() {
  static const std::vector<std::string> names{"results.json", "results.md", "effective_config.ini",
                                              "submission",   "models",     "tensorboard"};
  return names;
}

std::vector<fs::path> previous_outputs(const fs::path& output_dir) {
  std::vector<fs::path> found;
  for (const std::string& name : finetune_output_names()) {
    std::error_code ec;
    const fs::path p = output_dir / name;
    if (fs::symlink_status(p, ec).type() != fs::file_type::not_found && !ec) found.push_back(p);
  }
  return found;
}

void claim_output_dir(const fs::path& output_dir, bool overwrite) {
  const std::vector<fs::path> found = previous_outputs(output_dir);
  if (found.empty()) return;
  std::string names;
  for (const fs::path& p : found) names += (names.empty() ? "" : ", ") + p.filename().string();
  TUPE_CHECK(overwrite, "finetune.output_dir: " << output_dir.string() << " holds a previous fine-tuning (" << names
                                                << "); pass --overwrite to replace it whole, or choose another folder");
  for (const fs::path& p : found) {
    std::error_code ec;
    fs::remove_all(p, ec);
    TUPE_CHECK(!ec, p.string() << ": cannot remove: " << ec.message());
  }
}

std::vector<fs::path> remove_outputs(const fs::path& output_dir) noexcept {
  std::vector<fs::path> removed;
  try {
    for (const fs::path& p : previous_outputs(output_dir)) {
      std::error_code ec;
      fs::remove_all(p, ec);
      if (!ec) removed.push_back(p);
    }
  } catch (...) {  // a failure while cleaning up after a failure: the first error is the one to report
  }
  return removed;
}

}  // namespace tupe::finetune
