// Reader of NVIDIA DeepLearningExamples BERT shards (docs/formats.md "NVIDIA DeepLearningExamples BERT shards"), whole or by rows.
#include <sstream>

#include "common/error.h"
#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/shard_readers.h"

namespace tupe::data_pipeline {

namespace {

std::string shape_text(const std::vector<hsize_t>& dims) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  os << "]";
  return os.str();
}

void check_shape(const std::string& path, const char* name, const std::vector<hsize_t>& dims,
                 const std::vector<hsize_t>& expected, const char* like) {
  TUPE_CHECK(dims == expected, path << ": dataset '" << name << "' has shape " << shape_text(dims) << ", expected "
                                    << shape_text(expected) << " (as " << like << ")");
}

/// Opens integer dataset `name` of `rank` dimensions and checks it can be read whole.
h5::Id open_integer_dataset(const std::string& path, hid_t file, const char* name, int rank,
                            std::vector<hsize_t>& dims) {
  h5::Id ds(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  TUPE_CHECK(ds.valid(), path << ": dataset '" << name << "': cannot open: " << h5::error_text());
  h5::Id type(H5Dget_type(ds.get()), H5Tclose);
  TUPE_CHECK(H5Tget_class(type.get()) == H5T_INTEGER,
             path << ": dataset '" << name << "' has dtype " << h5::describe_type(type.get()) << ", expected an integer type");
  dims = h5::dataset_dims(path, file, name);
  TUPE_CHECK(static_cast<int>(dims.size()) == rank,
             path << ": dataset '" << name << "' has " << dims.size() << " dimensions, expected " << rank);
  const size_t elem = H5Tget_size(type.get());
  h5::check_readable(path, ds.get(), name, h5::checked_numel(path, name, dims, elem) * elem);
  return ds;
}

}  // namespace

NvidiaShardFile open_nvidia_shard(const std::string& path, int64_t vocab_size) {
  TUPE_CHECK(vocab_size > 0,
             path << ": NVIDIA shards record no vocabulary: the vocabulary size must be given (data.vocab_size)");
  NvidiaShardFile f;
  f.path = path;
  f.file = h5::open_file_readonly(path);
  const hid_t file = f.file.get();
  // Check every dataset's presence before opening any (cheap, and names the first missing one).
  for (const char* name :
       {"input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"})
    TUPE_CHECK(h5::has_dataset(file, name), path << ": missing dataset '" << name << "'");
  std::vector<hsize_t> ids_dims, pos_dims, dims;
  f.ids = open_integer_dataset(path, file, "input_ids", 2, ids_dims);
  f.mask = open_integer_dataset(path, file, "input_mask", 2, dims);
  check_shape(path, "input_mask", dims, ids_dims, "input_ids");
  f.segments = open_integer_dataset(path, file, "segment_ids", 2, dims);
  check_shape(path, "segment_ids", dims, ids_dims, "input_ids");
  f.positions = open_integer_dataset(path, file, "masked_lm_positions", 2, pos_dims);
  TUPE_CHECK(pos_dims[0] == ids_dims[0], path << ": dataset 'masked_lm_positions' has shape " << shape_text(pos_dims)
                                              << " but 'input_ids' has " << shape_text(ids_dims)
                                              << " (rows must agree)");
  f.labels = open_integer_dataset(path, file, "masked_lm_ids", 2, dims);
  check_shape(path, "masked_lm_ids", dims, pos_dims, "masked_lm_positions");
  f.nsp = open_integer_dataset(path, file, "next_sentence_labels", 1, dims);
  check_shape(path, "next_sentence_labels", dims, {ids_dims[0]}, "the rows of input_ids");
  f.rows = static_cast<int64_t>(ids_dims[0]);
  f.seq = static_cast<int64_t>(ids_dims[1]);
  f.pred = static_cast<int64_t>(pos_dims[1]);
  f.vocab_size = vocab_size;
  h5::Id dcpl(H5Dget_create_plist(f.ids.get()), H5Pclose);
  hsize_t chunk[2] = {0, 0};
  if (dcpl.valid() && H5Pget_layout(dcpl.get()) == H5D_CHUNKED && H5Pget_chunk(dcpl.get(), 2, chunk) == 2)
    f.chunk_rows = static_cast<int64_t>(chunk[0]);
  TUPE_CHECK(f.seq >= 2, path << ": dataset 'input_ids' has sequences of " << f.seq << " tokens");
  return f;
}

ShardContents read_nvidia_rows(const NvidiaShardFile& f, int64_t row_begin, int64_t rows) {
  const std::string& path = f.path;
  std::vector<int32_t> ids, positions, labels;
  std::vector<int8_t> mask, segments, nsp;
  const auto r0 = static_cast<hsize_t>(row_begin), n_rows = static_cast<hsize_t>(rows);
  h5::read_integer_rows(path, f.ids.get(), "input_ids", r0, n_rows, ids);
  h5::read_integer_rows(path, f.mask.get(), "input_mask", r0, n_rows, mask);
  h5::read_integer_rows(path, f.segments.get(), "segment_ids", r0, n_rows, segments);
  h5::read_integer_rows(path, f.positions.get(), "masked_lm_positions", r0, n_rows, positions);
  h5::read_integer_rows(path, f.labels.get(), "masked_lm_ids", r0, n_rows, labels);
  h5::read_integer_rows(path, f.nsp.get(), "next_sentence_labels", r0, n_rows, nsp);
  const int64_t seq = f.seq, pred = f.pred, vocab = f.vocab_size;
  const bool compact = vocab <= 65536;

  ShardContents c;
  c.path = path;
  c.mask_offsets.push_back(0);
  for (int64_t local = 0; local < rows; ++local) {
    const int64_t r = row_begin + local;  // the row in the file, for messages
    const size_t row = static_cast<size_t>(local * seq);
    int64_t len = 0;
    while (len < seq && mask[row + static_cast<size_t>(len)] == 1) ++len;
    for (int64_t j = len; j < seq; ++j)
      TUPE_CHECK(mask[row + static_cast<size_t>(j)] == 0,
                 path << ": dataset 'input_mask' row " << r << " column " << j << ": value "
                      << int(mask[row + static_cast<size_t>(j)]) << " (expected ones, then zeros)");
    TUPE_CHECK(len >= 1, path << ": dataset 'input_mask' row " << r << " has no real token");
    for (int64_t j = 0; j < len; ++j) {
      const int32_t id = ids[row + static_cast<size_t>(j)];
      TUPE_CHECK(id >= 0 && id < vocab, path << ": dataset 'input_ids' row " << r << " column " << j << ": id " << id
                                             << " outside the vocabulary of size " << vocab);
      const int8_t sg = segments[row + static_cast<size_t>(j)];
      TUPE_CHECK(sg == 0 || sg == 1,
                 path << ": dataset 'segment_ids' row " << r << " column " << j << ": value " << int(sg) << " (expected 0/1)");
    }
    c.append_ids(ids.data() + row, len, compact);
    c.segments.insert(c.segments.end(), segments.begin() + static_cast<std::ptrdiff_t>(row),
                      segments.begin() + static_cast<std::ptrdiff_t>(row) + len);
    // Static masks: ascending positions, the first 0 ends the list (position 0 is [CLS]).
    int32_t prev = 0;
    for (int64_t j = 0; j < pred; ++j) {
      const size_t k = static_cast<size_t>(local * pred + j);
      const int32_t pos = positions[k];
      if (pos == 0) break;
      TUPE_CHECK(pos > prev && pos < len, path << ": dataset 'masked_lm_positions' row " << r << " entry " << j
                                               << ": position " << pos << " is not ascending inside the " << len
                                               << " real tokens");
      TUPE_CHECK(labels[k] >= 0 && labels[k] < vocab, path << ": dataset 'masked_lm_ids' row " << r << " entry " << j
                                                            << ": id " << labels[k]
                                                            << " outside the vocabulary of size " << vocab);
      c.mask_positions.push_back(pos);
      c.mask_labels.push_back(labels[k]);
      prev = pos;
    }
    c.mask_offsets.push_back(static_cast<int64_t>(c.mask_positions.size()));
    const int8_t label = nsp[static_cast<size_t>(local)];
    TUPE_CHECK(label == 0 || label == 1,
               path << ": dataset 'next_sentence_labels' row " << r << ": value " << int(label) << " (expected 0/1)");
    c.nsp.push_back(label);
  }
  return c;
}

ShardContents read_nvidia_shard(const std::string& path, const DatasetOptions& options, int64_t& max_seq_len) {
  h5::Lock lock;
  const NvidiaShardFile f = open_nvidia_shard(path, options.vocab_size);
  max_seq_len = f.seq;
  return read_nvidia_rows(f, 0, f.rows);
}

}  // namespace tupe::data_pipeline
