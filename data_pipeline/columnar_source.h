// Columnar corpora of `tupe preprocess`: Parquet files and Arrow IPC files (the file format,
// and the stream format that `datasets`' save_to_disk writes as data-*.arrow), read through
// Apache Arrow's own C++ libraries (the pyarrow wheel; cmake/TupeArrow.cmake).
//
// Every row is one document: the string in column `preprocess.text_field` (top level,
// Arrow string, large_string or string_view; Parquet BYTE_ARRAY annotated as UTF-8), split
// at \n into lines, as the text of a JSON-lines record is. A null is no document: it is
// counted, skipped, and reported. The unit of work is a group: a Parquet row group or an
// Arrow record batch, read one at a time (memory is bounded by one group's text column plus
// buffers, whatever the file size). Rows are counted from 0 within their group, as pyarrow
// and `datasets` count; a Parquet row is also named by its row number in the file.
//
// A folder written by `datasets`' save_to_disk (data-*.arrow beside dataset_info.json and
// state.json) is taken as it is: the files its state.json lists, and not its JSON files.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tupe::data_pipeline {

/// Which columnar format a file holds, by its first bytes.
enum class Columnar {
  kNone,         ///< not columnar (text or JSON lines, maybe compressed)
  kParquet,      ///< "PAR1" (a file encrypted with an encrypted footer, "PARE", is refused)
  kArrowFile,    ///< "ARROW1" (Arrow IPC file format, also Feather v2)
  kArrowStream,  ///< FF FF FF FF then a message length (Arrow IPC stream format: datasets' data-*.arrow)
};
/// "none" | "parquet" | "arrow" | "arrow-stream".
std::string to_string(Columnar c);

/// The format of a file whose first bytes are `head` (at least the first 8 when the file is
/// that long). Throws tupe::Error "<path>: ..." for a Parquet file with an encrypted footer.
Columnar detect_columnar(const std::string& path, std::string_view head);

/// Whether this build reads columnar files (TUPE_WITH_ARROW).
bool columnar_supported();

/// One group of a columnar file: a Parquet row group or an Arrow record batch.
struct ColumnarGroup {
  int64_t index = 0;       ///< row group / record batch number in the file, from 0
  int64_t first_row = -1;  ///< Parquet: row number in the file of its first row; Arrow: -1 (not recorded)
  int64_t rows = -1;       ///< Parquet: its rows; Arrow: -1 (known once read)
  int64_t offset = 0;      ///< where its bytes start in the file (Arrow: its message)
  int64_t bytes = 0;       ///< its bytes in the file (all columns, compressed)
  int64_t metadata_length = 0;  ///< Arrow stream: the message's prefix and metadata
  int64_t body_length = 0;      ///< Arrow stream: the message's body
};

/// The groups of a columnar file, in order, after checking its schema: the column exists
/// once, at the top level, and holds strings. Reads the footer (Parquet, Arrow file) or
/// every message's header, never a body (Arrow stream). Throws tupe::Error "<path>: no column
/// \"<c>\" (its columns: ...)", "<path>: column \"<c>\" is <type>, not a string ...", "<path>:
/// not a readable Parquet file (...)", "<path>: byte N: damaged Arrow IPC message (...)".
std::vector<ColumnarGroup> columnar_groups(const std::string& path, Columnar kind, const std::string& column);

/// The text column of one group, read from the file.
struct ColumnarRows {
  std::vector<std::string_view> texts;  ///< one per row ("" for a null); views into `owner`'s buffers
  std::vector<bool> null;               ///< whether row i is null
  int64_t null_count = 0;
  int64_t first_null = -1;              ///< row (in the group) of its first null, -1 when none
  std::shared_ptr<const void> owner;    ///< keeps the column's buffers alive
};

/// One columnar file open for reading its groups (the footer or schema read once).
class ColumnarReader {
 public:
  /// Opens `path` (of format `kind`) to read column `column`. Throws as columnar_groups.
  ColumnarReader(const std::string& path, Columnar kind, const std::string& column);
  ~ColumnarReader();
  ColumnarReader(const ColumnarReader&) = delete;
  ColumnarReader& operator=(const ColumnarReader&) = delete;
  /// Reads group `group` (as columnar_groups found it): its column, every value checked for
  /// UTF-8. Throws tupe::Error "<path>: row group G: cannot read column \"c\" (<Arrow's
  /// message>)", "<path>: record batch B: ...", "<row_place>: invalid UTF-8 at byte N of its
  /// text: <cause>".
  ColumnarRows read(const ColumnarGroup& group);

 private:
  friend std::vector<ColumnarGroup> columnar_groups(const std::string&, Columnar, const std::string&);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// "<path>: row group G" or "<path>: record batch B": a group in messages.
std::string group_place(const std::string& path, Columnar kind, const ColumnarGroup& group);
/// "<group_place>, row R" (+ " (row F of the file)" for Parquet): a row in messages.
std::string row_place(const std::string& path, Columnar kind, const ColumnarGroup& group, int64_t row);

/// The key of a row's document in the train/validation draw (preprocess.h): group index and
/// row within it, so the draw does not depend on how ranks share the file.
inline int64_t columnar_document_key(const ColumnarGroup& group, int64_t row) {
  return (group.index << 32) | row;
}

/// When `dir` is a folder of `datasets`' save_to_disk (it holds state.json and
/// dataset_info.json), the data files its state.json lists ("_data_files"; list_input_files
/// sorts them with the other files, and the names datasets writes sort in its order);
/// otherwise nothing. Throws tupe::Error "<dir>/state.json: ..." for an unreadable state or a
/// listed file that is missing, and "<dir>: a DatasetDict folder (dataset_dict.json): name one
/// of its splits" for the folder above the splits.
std::vector<std::filesystem::path> datasets_folder_files(const std::filesystem::path& dir);

}  // namespace tupe::data_pipeline
