// open_pretrain_dataset (dataset.h): file listing, format detection, cross-shard checks.
#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "data_pipeline/dataset.h"
#include "data_pipeline/shard_readers.h"

namespace fs = std::filesystem;

namespace tupe::data {

namespace {

bool is_shard_name(const std::string& name) {
  for (const char* ext : {".h5", ".hdf5", ".hdf"})
    if (name.size() > std::string(ext).size() && name.compare(name.size() - std::string(ext).size(), std::string::npos, ext) == 0)
      return true;
  return false;
}

bool in_split(const std::string& name, const std::string& split) {
  if (split == "train") return name.find("train") != std::string::npos;
  return name.find("valid") != std::string::npos || name.find("test") != std::string::npos;
}

bool same_special(const SpecialTokens& a, const SpecialTokens& b) {
  return a.pad == b.pad && a.unk == b.unk && a.cls == b.cls && a.sep == b.sep && a.mask == b.mask;
}

}  // namespace

std::vector<std::string> list_shard_files(const std::vector<std::string>& paths, const std::string& split) {
  TUPE_CHECK(split == "train" || split == "validation",
             "data.split: expected train or validation, got '" << split << "'");
  TUPE_CHECK(!paths.empty(), "data: no shard files or folders given");
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && is_shard_name(name) && in_split(name, split)) found.push_back(e.path().string());
      }
      TUPE_CHECK(!ec, p << ": cannot list folder (" << ec.message() << ")");
      TUPE_CHECK(!found.empty(), p << ": no " << split << " shards (*.h5, *.hdf5 named with "
                                  << (split == "train" ? "'train'" : "'valid' or 'test'") << ")");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      TUPE_CHECK(fs::is_regular_file(p, ec), p << ": no such shard file or folder");
      files.push_back(p);
    }
  }
  return files;
}

std::shared_ptr<const PretrainDataset> open_pretrain_dataset(const std::vector<std::string>& paths,
                                                             const DatasetOptions& options) {
  const std::vector<std::string> files = list_shard_files(paths, options.split);
  DatasetInfo info;
  std::vector<ShardContents> shards;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string& path = files[f];
    const std::string format = detect_shard_format(path);
    TUPE_CHECK(f == 0 || format == info.format,
               path << ": is a " << format << " shard but " << files[0] << " is a " << info.format << " shard");
    if (format == "tupe") {
      ShardHeader h;
      shards.push_back(read_own_shard(path, options, h));
      if (f == 0) {
        info.format = format;
        info.max_seq_len = h.max_seq_len;
        info.vocab_size = h.vocab_size;
        info.special = h.special;
        info.vocab_sha256 = h.vocab_sha256;
        info.tokenizer_kind = h.tokenizer_kind;
        info.lower_case = h.lower_case;
      } else {
        TUPE_CHECK(h.vocab_sha256 == info.vocab_sha256 && h.vocab_size == info.vocab_size,
                   path << ": vocabulary (SHA-256 " << h.vocab_sha256 << ", size " << h.vocab_size << ") differs from "
                        << files[0] << "'s (" << info.vocab_sha256 << ", " << info.vocab_size << ")");
        TUPE_CHECK(same_special(h.special, info.special), path << ": special token ids differ from " << files[0] << "'s");
        TUPE_CHECK(h.max_seq_len == info.max_seq_len, path << ": max_seq_len " << h.max_seq_len << " differs from "
                                                           << files[0] << "'s " << info.max_seq_len);
      }
    } else {
      int64_t seq = 0;
      shards.push_back(read_nvidia_shard(path, options, seq));
      if (f == 0) {
        info.format = format;
        info.max_seq_len = seq;
        info.vocab_size = options.vocab_size;
        info.special = options.nvidia_special;
        info.has_segment_ids = info.has_static_masks = info.has_next_sentence_labels = true;
      } else {
        TUPE_CHECK(seq == info.max_seq_len, path << ": sequence length " << seq << " differs from " << files[0]
                                                 << "'s " << info.max_seq_len);
      }
    }
  }
  info.files = files;
  return std::make_shared<ShardSetDataset>(std::move(info), std::move(shards));
}

}  // namespace tupe::data
