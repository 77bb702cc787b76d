// Columnar corpora read through Apache Arrow's C++ libraries (columnar_source.h): Parquet
// by row group (parquet::arrow::FileReader, the text column only), Arrow IPC files by record
// batch (ipc::RecordBatchFileReader), Arrow IPC streams by record batch at the offsets found
// by reading every message's header once (ipc::Message::Open on the metadata alone; a body
// is read only for the batch wanted, ipc::ReadMessage at its offset). Files are read with
// pread (io::ReadableFile), never mapped: what a group read leaves in memory is freed when
// its ColumnarRows goes. Arrow's Status and Parquet's exceptions become one tupe::Error line
// naming the file and the group.
#include "data_pipeline/columnar_source.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "data_pipeline/text/utf8.h"

#if TUPE_HAVE_ARROW
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/api.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>
#endif

namespace tupe::data_pipeline {

#if TUPE_HAVE_ARROW

namespace {

/// Arrow's message on one line.
std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

void check_ok(const arrow::Status& status, const std::string& what) {
  if (!status.ok()) throw Error(what + " (" + one_line(status.ToString()) + ")");
}

template <class T>
T value_of(arrow::Result<T> result, const std::string& what) {
  check_ok(result.status(), what);
  return std::move(result).ValueUnsafe();
}

std::shared_ptr<arrow::io::ReadableFile> open_file(const std::string& path) {
  return value_of(arrow::io::ReadableFile::Open(path), path + ": cannot open for reading");
}

/// The field index of top-level column `column` in `schema`, checked to hold strings.
int string_field(const std::string& path, const arrow::Schema& schema, const std::string& column) {
  const std::vector<int> found = schema.GetAllFieldIndices(column);
  if (found.empty()) {
    std::string names;
    for (int i = 0; i < schema.num_fields() && i < 20; ++i) names += (i ? ", " : "") + schema.field(i)->name();
    if (schema.num_fields() > 20) names += ", ...";
    throw Error(path + ": no column \"" + column + "\" (its columns: " + names +
                "); name the text column with preprocess.text_field");
  }
  TUPE_CHECK(found.size() == 1, path << ": " << found.size() << " columns are named \"" << column << "\"");
  const auto& type = *schema.field(found[0])->type();
  const auto id = type.id();
  TUPE_CHECK(id == arrow::Type::STRING || id == arrow::Type::LARGE_STRING || id == arrow::Type::STRING_VIEW,
             path << ": column \"" << column << "\" is " << type.ToString()
                  << ", not a string (string, large_string or string_view)");
  return found[0];
}

/// Reads "<continuation><length>" at `pos` of an IPC stream: the metadata's length and the
/// prefix's (8 bytes; 4 for the pre-1.0 format without the continuation marker); 0 at the
/// end-of-stream marker or the end of the file.
std::pair<int32_t, int32_t> message_prefix(arrow::io::RandomAccessFile& file, const std::string& path, int64_t pos,
                                           int64_t size) {
  if (pos + 4 > size) return {0, 0};
  const auto head = value_of(file.ReadAt(pos, std::min<int64_t>(8, size - pos)), path + ": read failed at byte " +
                                                                                       std::to_string(pos));
  int32_t first = 0, second = 0;
  std::memcpy(&first, head->data(), 4);
  if (first != -1) return {first, 4};
  TUPE_CHECK(head->size() == 8, path << ": byte " << pos << ": damaged Arrow IPC stream (the file ends in a message prefix)");
  std::memcpy(&second, head->data() + 4, 4);
  return {second, 8};
}

template <class ArrayType>
void take_values(const arrow::Array& chunk, ColumnarRows& rows) {
  const auto& a = static_cast<const ArrayType&>(chunk);
  for (int64_t i = 0; i < a.length(); ++i) {
    const bool null = a.IsNull(i);
    if (null) {
      if (rows.first_null < 0) rows.first_null = static_cast<int64_t>(rows.texts.size());
      ++rows.null_count;
    }
    rows.null.push_back(null);
    rows.texts.push_back(null ? std::string_view() : std::string_view(a.GetView(i)));
  }
}

}  // namespace

struct ColumnarReader::Impl {
  std::string path;
  Columnar kind;
  std::string column;
  std::shared_ptr<arrow::io::ReadableFile> file;
  // Parquet
  std::unique_ptr<parquet::arrow::FileReader> parquet;
  int leaf = -1;  ///< the column's leaf index
  // Arrow
  std::shared_ptr<arrow::ipc::RecordBatchFileReader> arrow_file;
  std::shared_ptr<arrow::Schema> schema;
  arrow::ipc::DictionaryMemo memo;
  arrow::ipc::IpcReadOptions options = arrow::ipc::IpcReadOptions::Defaults();
  int field = -1;

  void open() {
    file = open_file(path);
    if (kind == Columnar::kParquet) {
      parquet::ReaderProperties props(arrow::default_memory_pool());
      props.set_page_checksum_verification(true);  // where the writer stored page CRCs
      std::unique_ptr<parquet::ParquetFileReader> pf;
      try {
        pf = parquet::ParquetFileReader::Open(file, props);
      } catch (const std::exception& e) {
        throw Error(path + ": not a readable Parquet file (" + one_line(e.what()) + ")");
      }
      parquet::ArrowReaderProperties aprops;
      aprops.set_use_threads(false);  // one core per rank; no reader threads
      aprops.set_pre_buffer(false);   // synchronous reads of what is asked, nothing ahead
      parquet = value_of(parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(pf), aprops),
                         path + ": not a readable Parquet file");
      std::shared_ptr<arrow::Schema> s;
      check_ok(parquet->GetSchema(&s), path + ": not a readable Parquet file (schema)");
      field = string_field(path, *s, column);
      leaf = parquet->manifest().schema_fields[static_cast<size_t>(field)].column_index;
      TUPE_CHECK(leaf >= 0, path << ": column \"" << column << "\" is not a flat column");
      return;
    }
    if (kind == Columnar::kArrowFile) {
      arrow_file = value_of(arrow::ipc::RecordBatchFileReader::Open(file), path + ": not a readable Arrow IPC file");
      schema = arrow_file->schema();
      field = string_field(path, *schema, column);
      options.included_fields = {field};
      arrow_file = value_of(arrow::ipc::RecordBatchFileReader::Open(file, options),
                            path + ": not a readable Arrow IPC file");
      return;
    }
    // Stream: the first message is the schema.
    const int64_t size = value_of(file->GetSize(), path + ": cannot read size");
    const auto [length, prefix] = message_prefix(*file, path, 0, size);
    TUPE_CHECK(length > 0 && prefix + int64_t{length} <= size, path << ": byte 0: damaged Arrow IPC stream (no schema message)");
    auto metadata = value_of(file->ReadAt(prefix, length), path + ": read failed at byte " + std::to_string(prefix));
    const auto message = value_of(arrow::ipc::Message::Open(metadata, nullptr),
                                  path + ": byte 0: damaged Arrow IPC message");
    TUPE_CHECK(message->type() == arrow::ipc::MessageType::SCHEMA,
               path << ": byte 0: damaged Arrow IPC stream (its first message is not a schema)");
    schema = value_of(arrow::ipc::ReadSchema(*message, &memo), path + ": byte 0: damaged Arrow IPC schema");
    field = string_field(path, *schema, column);
    options.included_fields = {field};
  }
};

bool columnar_supported() { return true; }

ColumnarReader::ColumnarReader(const std::string& path, Columnar kind, const std::string& column)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->kind = kind;
  impl_->column = column;
  impl_->open();
}

ColumnarReader::~ColumnarReader() = default;

std::vector<ColumnarGroup> columnar_groups(const std::string& path, Columnar kind, const std::string& column) {
  ColumnarReader reader(path, kind, column);
  ColumnarReader::Impl& r = *reader.impl_;
  std::vector<ColumnarGroup> groups;
  if (kind == Columnar::kParquet) {
    const auto metadata = r.parquet->parquet_reader()->metadata();
    int64_t first = 0, offset = 0;
    for (int g = 0; g < metadata->num_row_groups(); ++g) {
      const auto rg = metadata->RowGroup(g);
      ColumnarGroup group;
      group.index = g;
      group.first_row = first;
      group.rows = rg->num_rows();
      group.offset = offset;  // nominal: the groups' sizes back to back (progress only)
      group.bytes = rg->total_compressed_size();
      first += group.rows;
      offset += group.bytes;
      groups.push_back(group);
    }
    return groups;
  }
  const int64_t size = value_of(r.file->GetSize(), path + ": cannot read size");
  if (kind == Columnar::kArrowFile) {
    const int n = r.arrow_file->num_record_batches();
    for (int b = 0; b < n; ++b) {
      ColumnarGroup group;
      group.index = b;
      group.offset = size * b / std::max(n, 1);  // nominal (progress only)
      group.bytes = size * (b + 1) / n - group.offset;
      groups.push_back(group);
    }
    return groups;
  }
  // Stream: every message's header, from the one after the schema to the end-of-stream marker.
  int64_t pos = 0;
  for (bool schema = true;; schema = false) {
    const auto [length, prefix] = message_prefix(*r.file, path, pos, size);
    if (length == 0) break;
    const std::string at = path + ": byte " + std::to_string(pos);
    TUPE_CHECK(length > 0 && pos + prefix + int64_t{length} <= size,
               at << ": damaged Arrow IPC stream (a message of " << length << " bytes of metadata past the file's end)");
    auto metadata = value_of(r.file->ReadAt(pos + prefix, length), at + ": read failed");
    const auto message = value_of(arrow::ipc::Message::Open(metadata, nullptr), at + ": damaged Arrow IPC message");
    const int64_t body = message->body_length();
    TUPE_CHECK(body >= 0 && pos + prefix + length + body <= size,
               at << ": damaged Arrow IPC stream (a message body of " << body << " bytes past the file's end)");
    const auto type = message->type();
    if (!schema) {
      TUPE_CHECK(type != arrow::ipc::MessageType::DICTIONARY_BATCH,
                 at << ": a dictionary batch; dictionary-encoded columns are not read (cast them to plain strings)");
      TUPE_CHECK(type == arrow::ipc::MessageType::RECORD_BATCH,
                 at << ": damaged Arrow IPC stream (a message that is not a record batch)");
      ColumnarGroup group;
      group.index = static_cast<int64_t>(groups.size());
      group.offset = pos;
      group.metadata_length = prefix + length;
      group.body_length = body;
      group.bytes = prefix + length + body;
      groups.push_back(group);
    }
    pos += prefix + length + body;
  }
  return groups;
}

ColumnarRows ColumnarReader::read(const ColumnarGroup& group) {
  Impl& r = *impl_;
  const std::string where = group_place(r.path, r.kind, group);
  const std::string what = where + ": cannot read column \"" + r.column + "\"";
  std::shared_ptr<arrow::ChunkedArray> column;
  try {
    if (r.kind == Columnar::kParquet) {
      const auto table = value_of(r.parquet->ReadRowGroup(static_cast<int>(group.index), {r.leaf}), what);
      TUPE_CHECK(table->num_columns() == 1 && table->num_rows() == group.rows,
                 what << " (" << table->num_rows() << " rows read, " << group.rows << " in the footer)");
      column = table->column(0);
    } else {
      std::shared_ptr<arrow::RecordBatch> batch;
      if (r.kind == Columnar::kArrowFile) {
        batch = value_of(r.arrow_file->ReadRecordBatch(static_cast<int>(group.index)), what);
      } else {
        const auto message = value_of(arrow::ipc::ReadMessage(group.offset, static_cast<int32_t>(group.metadata_length),
                                                              group.body_length, r.file.get()),
                                      what);
        TUPE_CHECK(message && message->type() == arrow::ipc::MessageType::RECORD_BATCH, what << " (not a record batch)");
        batch = value_of(arrow::ipc::ReadRecordBatch(*message, r.schema, &r.memo, r.options), what);
      }
      check_ok(batch->ValidateFull(), what);
      TUPE_CHECK(batch->num_columns() == 1, what << " (" << batch->num_columns() << " columns read)");
      column = std::make_shared<arrow::ChunkedArray>(batch->column(0));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // parquet::ParquetException, std::bad_alloc, ...
    throw Error(what + " (" + one_line(e.what()) + ")");
  }
  ColumnarRows rows;
  rows.texts.reserve(static_cast<size_t>(column->length()));
  rows.null.reserve(static_cast<size_t>(column->length()));
  for (const auto& chunk : column->chunks()) {
    switch (chunk->type_id()) {
      case arrow::Type::STRING: take_values<arrow::StringArray>(*chunk, rows); break;
      case arrow::Type::LARGE_STRING: take_values<arrow::LargeStringArray>(*chunk, rows); break;
      case arrow::Type::STRING_VIEW: take_values<arrow::StringViewArray>(*chunk, rows); break;
      default: throw Error(what + " (it holds " + chunk->type()->ToString() + " here, not strings)");
    }
  }
  for (size_t i = 0; i < rows.texts.size(); ++i) {
    const char* cause = nullptr;
    const size_t bad = find_invalid_utf8(rows.texts[i], &cause);
    TUPE_CHECK(bad == std::string_view::npos, row_place(r.path, r.kind, group, static_cast<int64_t>(i))
                                                  << ": invalid UTF-8 at byte " << bad << " of its text: "
                                                  << (cause ? cause : "malformed sequence"));
  }
  rows.owner = column;
  return rows;
}

#else  // built without Arrow (TUPE_WITH_ARROW=OFF)

namespace {
[[noreturn]] void no_arrow(const std::string& path, Columnar kind) {
  throw Error(path + ": a" + (kind == Columnar::kParquet ? " Parquet" : "n Arrow IPC") +
              " file; this tupe was built without Apache Arrow (TUPE_WITH_ARROW=OFF), so it reads text and JSON "
              "lines only");
}
}  // namespace

struct ColumnarReader::Impl {};

bool columnar_supported() { return false; }

ColumnarReader::ColumnarReader(const std::string& path, Columnar kind, const std::string&) { no_arrow(path, kind); }

ColumnarReader::~ColumnarReader() = default;

std::vector<ColumnarGroup> columnar_groups(const std::string& path, Columnar kind, const std::string&) {
  no_arrow(path, kind);
}

ColumnarRows ColumnarReader::read(const ColumnarGroup&) { return {}; }

#endif

}  // namespace tupe::data_pipeline
