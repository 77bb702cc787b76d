// Reader of NVIDIA DeepLearningExamples BERT shards (FORMATS.md section 1).
#include <sstream>

#include "common/error.h"
#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/shard_readers.h"

namespace tupe::data {

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

}  // namespace

ShardContents read_nvidia_shard(const std::string& path, const DatasetOptions& options, int64_t& max_seq_len) {
  TUPE_CHECK(options.vocab_size > 0,
             path << ": NVIDIA shards record no vocabulary: the vocabulary size must be given (data.vocab_size)");
  std::vector<int32_t> ids, positions, labels;
  std::vector<int8_t> mask, segments, nsp;
  std::vector<hsize_t> ids_dims, pos_dims;
  {
    h5::Lock lock;
    h5::Id file = h5::open_file_readonly(path);
    // Check every dataset's presence before reading any (cheap, and names the first missing one).
    for (const char* name :
         {"input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"})
      TUPE_CHECK(h5::has_dataset(file.get(), name), path << ": missing dataset '" << name << "'");
    ids_dims = h5::read_integer_dataset(path, file.get(), "input_ids", 2, ids);
    check_shape(path, "input_mask", h5::read_integer_dataset(path, file.get(), "input_mask", 2, mask), ids_dims,
                "input_ids");
    check_shape(path, "segment_ids", h5::read_integer_dataset(path, file.get(), "segment_ids", 2, segments), ids_dims,
                "input_ids");
    pos_dims = h5::read_integer_dataset(path, file.get(), "masked_lm_positions", 2, positions);
    TUPE_CHECK(pos_dims[0] == ids_dims[0], path << ": dataset 'masked_lm_positions' has shape " << shape_text(pos_dims)
                                                << " but 'input_ids' has " << shape_text(ids_dims)
                                                << " (rows must agree)");
    check_shape(path, "masked_lm_ids", h5::read_integer_dataset(path, file.get(), "masked_lm_ids", 2, labels),
                pos_dims, "masked_lm_positions");
    check_shape(path, "next_sentence_labels",
                h5::read_integer_dataset(path, file.get(), "next_sentence_labels", 1, nsp), {ids_dims[0]},
                "the rows of input_ids");
  }
  const auto n = static_cast<int64_t>(ids_dims[0]);
  const auto seq = static_cast<int64_t>(ids_dims[1]);
  const auto pred = static_cast<int64_t>(pos_dims[1]);
  TUPE_CHECK(seq >= 2, path << ": dataset 'input_ids' has sequences of " << seq << " tokens");
  max_seq_len = seq;
  const int64_t vocab = options.vocab_size;
  const bool compact = vocab <= 65536;

  ShardContents c;
  c.path = path;
  c.mask_offsets.push_back(0);
  for (int64_t r = 0; r < n; ++r) {
    const size_t row = static_cast<size_t>(r * seq);
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
      const size_t k = static_cast<size_t>(r * pred + j);
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
    const int8_t label = nsp[static_cast<size_t>(r)];
    TUPE_CHECK(label == 0 || label == 1,
               path << ": dataset 'next_sentence_labels' row " << r << ": value " << int(label) << " (expected 0/1)");
    c.nsp.push_back(label);
  }
  return c;
}

}  // namespace tupe::data
