// Columnar corpora: what does not need Arrow's libraries (the format by its first bytes,
// places in messages, `datasets`' save_to_disk folders). The reading: columnar_read.cpp.
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "data_pipeline/columnar_source.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {

std::string to_string(Columnar c) {
  switch (c) {
    case Columnar::kNone: return "none";
    case Columnar::kParquet: return "parquet";
    case Columnar::kArrowFile: return "arrow";
    case Columnar::kArrowStream: return "arrow-stream";
  }
  return "?";
}

Columnar detect_columnar(const std::string& path, std::string_view head) {
  if (head.substr(0, 4) == "PAR1") return Columnar::kParquet;
  TUPE_CHECK(head.substr(0, 4) != "PARE", path << ": a Parquet file with an encrypted footer; tupe reads unencrypted "
                                                  "Parquet only (decrypt it first)");
  if (head.substr(0, 6) == "ARROW1") return Columnar::kArrowFile;
  // A stream starts with a message: the continuation marker 0xFFFFFFFF, then its length.
  // (Text cannot: FF is never a byte of UTF-8.)
  if (head.size() >= 8 && head.substr(0, 4) == std::string_view("\xFF\xFF\xFF\xFF", 4)) return Columnar::kArrowStream;
  return Columnar::kNone;
}

std::string group_place(const std::string& path, Columnar kind, const ColumnarGroup& group) {
  return path + (kind == Columnar::kParquet ? ": row group " : ": record batch ") + std::to_string(group.index);
}

std::string row_place(const std::string& path, Columnar kind, const ColumnarGroup& group, int64_t row) {
  std::string place = group_place(path, kind, group) + ", row " + std::to_string(row);
  if (group.first_row >= 0) place += " (row " + std::to_string(group.first_row + row) + " of the file)";
  return place;
}

std::vector<fs::path> datasets_folder_files(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "dataset_dict.json", ec))
    throw Error(dir.string() + ": a DatasetDict folder (dataset_dict.json, written by DatasetDict.save_to_disk): name "
                "one of its splits (e.g. " + (dir / "train").string() + ")");
  const fs::path state = dir / "state.json";
  if (!fs::is_regular_file(state, ec) || !fs::is_regular_file(dir / "dataset_info.json", ec)) return {};
  std::ifstream in(state);
  TUPE_CHECK(in.good(), state.string() << ": cannot open for reading");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(state.string() + ": invalid JSON (" + e.what() + ")");
  }
  TUPE_CHECK(j.is_object() && j.contains("_data_files") && j["_data_files"].is_array(),
             state.string() << ": no \"_data_files\" list (not a state.json of datasets' save_to_disk?)");
  std::vector<fs::path> files;
  std::set<std::string> seen;
  for (const auto& entry : j["_data_files"]) {
    TUPE_CHECK(entry.is_object() && entry.contains("filename") && entry["filename"].is_string(),
               state.string() << ": an entry of \"_data_files\" without a \"filename\" string");
    const std::string name = entry["filename"].get<std::string>();
    TUPE_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
               state.string() << ": \"_data_files\" names '" << name << "', not a file of this folder");
    TUPE_CHECK(seen.insert(name).second, state.string() << ": \"_data_files\" names " << name << " twice");
    const fs::path file = dir / name;
    TUPE_CHECK(fs::is_regular_file(file, ec), state.string() << ": lists " << name << ", which " << dir.string()
                                                             << " does not hold");
    files.push_back(file);
  }
  TUPE_CHECK(!files.empty(), state.string() << ": \"_data_files\" is empty");
  return files;
}

}  // namespace tupe::data_pipeline
