// open_pretrain_dataset (dataset.h): file listing, format detection, cross-shard checks.
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/fnv1a.h"
#include "common/log.h"
#include "data_pipeline/dataset.h"
#include "data_pipeline/on_demand.h"
#include "data_pipeline/shard_readers.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {

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

/// The first of shard_set_problems' findings, thrown.
void check_shard_sets(const std::vector<std::string>& files, const std::vector<ShardHeader>& headers) {
  const std::vector<std::string> problems = shard_set_problems(files, headers);
  if (!problems.empty()) TUPE_FAIL(problems.front());
}

/// Descriptors this process holds now (the entries of /proc/self/fd, less the one listing
/// them); -1 when /proc cannot be read.
int64_t open_descriptors() {
  std::error_code ec;
  int64_t n = 0;
  for (fs::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return ec ? -1 : std::max<int64_t>(n - 1, 0);
}

/// Descriptors kept free beyond the shards for what a run opens after its data: checkpoint
/// files (a few at a time), HDF5's transient opens, sockets that MPI or NCCL open later.
/// Measured (/proc/<pid>/fd through a tiny pre-training on 64 shards, bench/RESULTS.md): 20
/// descriptors open at this check in a single process, 17 in a rank under mpirun, and at
/// most 22 besides the shards' during the run.
constexpr int64_t kDescriptorHeadroom = 64;

/// On-demand reading keeps one descriptor per shard open: `need` = the descriptors open
/// now + one per shard + kDescriptorHeadroom. Raises the soft limit on open files to the
/// hard one when the shards need it (a corpus of thousands of shards); throws when even the
/// hard limit is too small.
void ensure_descriptors(size_t shards) {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const int64_t open_now = open_descriptors();
  const int64_t base = open_now >= 0 ? open_now : kDescriptorHeadroom;  // no /proc: assume as many again
  const auto need = static_cast<rlim_t>(base + static_cast<int64_t>(shards) + kDescriptorHeadroom);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need) {
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? need : std::min<rlim_t>(std::max(need, lim.rlim_cur), lim.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  TUPE_CHECK(lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= need,
             "data: " << shards << " shard files need about " << need << " open files (" << base
                      << " open now, one per shard, " << kDescriptorHeadroom << " spare), but `ulimit -n` allows "
                      << lim.rlim_cur << " (hard limit " << lim.rlim_max
                      << "); raise the limit (`ulimit -n`, or the job's limits) or merge shards");
}

/// One line, once per data set: which shards are read unverified (no checksums).
void note_unverified(const std::string& split, const std::vector<std::string>& files,
                     const std::vector<ShardHeader>& headers, const std::string& format) {
  if (format != "tupe") {
    log::warn(split + " data: NVIDIA shards carry no checksums: their samples are read unverified (" +
              std::to_string(files.size()) + " files, first " + files.front() + ")");
    return;
  }
  int64_t old = 0;
  size_t first = files.size();
  std::map<int64_t, int64_t> versions;
  for (size_t f = 0; f < headers.size(); ++f)
    if (headers[f].format_version < kFirstVerifiedShardVersion) {
      ++old;
      ++versions[headers[f].format_version];
      if (first == files.size()) first = f;
    }
  if (old == 0) return;
  std::ostringstream os;
  os << split << " data: " << old << " of " << files.size() << " shards (first " << files[first]
     << ") are of format version";
  for (auto it = versions.begin(); it != versions.end(); ++it)
    os << (it == versions.begin() ? " " : " and ") << it->first;
  os << ", written before shards carried checksums: their samples are read unverified; run tupe preprocess again "
        "for verified reads";
  log::warn(os.str());
}

/// FNV-1a 64 over the samples' lengths (each as 8 little-endian bytes).
uint64_t fnv1a_lengths(const std::vector<int64_t>& offsets) {
  uint64_t h = kFnv1a64Basis;
  for (size_t i = 1; i < offsets.size(); ++i) {
    const auto len = static_cast<uint64_t>(offsets[i] - offsets[i - 1]);
    char bytes[8];
    for (int b = 0; b < 8; ++b) bytes[b] = static_cast<char>((len >> (8 * b)) & 0xff);
    h = fnv1a_64(std::string_view(bytes, 8), h);
  }
  return h;
}

}  // namespace

namespace {

/// The run alone (its recorded id, or what it was made of), without split and shard count.
std::string run_identity(const ShardHeader& h) {
  std::ostringstream os;
  if (!h.run_id.empty()) {
    os << h.run_id;
  } else {
    os << h.command_line << "|" << h.seed << "|" << h.validation_ratio << "|" << h.vocab_sha256 << "|"
       << h.piece_bytes << "|" << h.max_seq_len << "|" << h.packing << "|" << h.documents << "|" << h.split_rule;
  }
  return os.str();
}

}  // namespace

std::string shard_run_key(const ShardHeader& h) {
  return h.split + "|" + std::to_string(h.num_shards) + "|" + run_identity(h);
}

std::vector<std::string> shard_set_problems(const std::vector<std::string>& files,
                                            const std::vector<ShardHeader>& headers) {
  std::vector<std::string> problems;
  std::map<std::string, std::vector<size_t>> runs;  // (split, shard count, run) -> file positions
  std::set<std::string> identities;                 // the preprocess runs
  for (size_t f = 0; f < files.size(); ++f) {
    runs[shard_run_key(headers[f])].push_back(f);
    identities.insert(run_identity(headers[f]));
  }
  for (const auto& [key, members] : runs) {
    const ShardHeader& first = headers[members.front()];
    const int64_t n = first.num_shards;
    if (n < 1 || n > 99999) {
      problems.push_back(files[members.front()] + ": attribute 'num_shards' = " + std::to_string(n) + " is out of range");
      continue;
    }
    std::vector<int64_t> owner(static_cast<size_t>(n), -1);
    for (const size_t f : members) {
      const int64_t s = headers[f].shard_index;
      std::ostringstream os;
      if (s < 0 || s >= n) {
        os << files[f] << ": attribute 'shard_index' = " << s << " is outside 0.." << n - 1;
      } else if (owner[static_cast<size_t>(s)] >= 0) {
        os << files[f] << ": " << first.split << " shard " << s << " of " << n << " is listed twice (also "
           << files[static_cast<size_t>(owner[static_cast<size_t>(s)])] << ")";
      } else {
        owner[static_cast<size_t>(s)] = static_cast<int64_t>(f);
        continue;
      }
      problems.push_back(os.str());
    }
    std::ostringstream missing;
    int64_t n_missing = 0;
    for (int64_t s = 0; s < n; ++s)
      if (owner[static_cast<size_t>(s)] < 0) {
        if (n_missing < 8) missing << (n_missing ? ", " : "") << shard_file_name(first.split, s, n);
        ++n_missing;
      }
    if (n_missing == 0) continue;
    std::ostringstream os;
    os << files[members.front()] << ": incomplete shard set: " << n_missing << " of the " << n << " " << first.split
       << " shards of its preprocess run are missing (" << missing.str() << (n_missing > 8 ? ", ..." : "") << ")";
    if (identities.size() > 1)
      os << "; the listed shards come from " << identities.size() << " different preprocess runs";
    problems.push_back(os.str());
  }
  return problems;
}

std::string shard_header_mismatch(const std::string& path, const ShardHeader& h, const std::string& first_path,
                                  const ShardHeader& first) {
  std::ostringstream os;
  if (h.vocab_sha256 != first.vocab_sha256 || h.vocab_size != first.vocab_size)
    os << path << ": vocabulary (SHA-256 " << h.vocab_sha256 << ", size " << h.vocab_size << ") differs from "
       << first_path << "'s (" << first.vocab_sha256 << ", " << first.vocab_size << ")";
  else if (!same_special(h.special, first.special))
    os << path << ": special token ids differ from " << first_path << "'s";
  else if (h.max_seq_len != first.max_seq_len)
    os << path << ": max_seq_len " << h.max_seq_len << " differs from " << first_path << "'s " << first.max_seq_len;
  return os.str();
}

std::vector<std::string> list_all_shard_files(const std::vector<std::string>& paths) {
  TUPE_CHECK(!paths.empty(), "data: no shard files or folders given");
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file() && is_shard_name(e.path().filename().string())) found.push_back(e.path().string());
      TUPE_CHECK(!ec, p << ": cannot list folder (" << ec.message() << ")");
      TUPE_CHECK(!found.empty(), p << ": no shard files (*.h5, *.hdf5, *.hdf)");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      TUPE_CHECK(fs::is_regular_file(p, ec), p << ": no such shard file or folder");
      files.push_back(p);
    }
  }
  return files;
}

std::vector<std::pair<std::string, std::string>> describe_shards(const DatasetInfo& info, const std::string& split) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back(split + " format", info.format + ", vocabulary " + std::to_string(info.vocab_size) + " " +
                                          info.vocab_sha256 + ", max_seq_len " + std::to_string(info.max_seq_len));
  for (size_t i = 0; i < info.shards.size(); ++i) {
    const ShardSummary& s = info.shards[i];
    std::ostringstream v;
    v << fs::path(s.path).filename().string() << ", " << s.file_bytes << " bytes, " << s.sequences << " sequences, "
      << s.tokens << " tokens, lengths hash " << std::hex << s.index_hash;
    if (s.checksums_hash != 0) v << ", checksums hash " << s.checksums_hash;
    out.emplace_back(split + " shard " + std::to_string(i), v.str());
  }
  return out;
}

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
  const bool on_demand = !options.in_memory;
  if (on_demand) ensure_descriptors(files.size());
  DatasetInfo info;
  std::vector<ShardContents> shards;                  // in memory
  std::vector<std::unique_ptr<ShardSource>> sources;  // on demand
  const auto cache = on_demand ? std::make_shared<BlockCache>(options.cache_bytes) : nullptr;
  std::vector<ShardHeader> headers;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string& path = files[f];
    const std::string format = detect_shard_format(path);
    TUPE_CHECK(f == 0 || format == info.format,
               path << ": is a " << format << " shard but " << files[0] << " is a " << info.format << " shard");
    if (format == "tupe") {
      ShardHeader h;
      if (on_demand)
        sources.push_back(open_own_shard_on_demand(path, options, h, cache, f));
      else
        shards.push_back(read_own_shard(path, options, h));
      TUPE_CHECK(h.split == options.split, path << ": a " << h.split << " shard, listed as " << options.split
                                                << " data (data." << options.split << "_shards)");
      headers.push_back(h);
      if (f == 0) {
        info.format = format;
        info.max_seq_len = h.max_seq_len;
        info.vocab_size = h.vocab_size;
        info.special = h.special;
        info.vocab_sha256 = h.vocab_sha256;
        info.tokenizer_kind = h.tokenizer_kind;
        info.lower_case = h.lower_case;
      } else {
        const std::string mismatch = shard_header_mismatch(path, h, files[0], headers.front());
        TUPE_CHECK(mismatch.empty(), mismatch);
      }
    } else {
      int64_t seq = 0;
      if (on_demand)
        sources.push_back(open_nvidia_shard_on_demand(path, options, seq, cache, f));
      else
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
  if (info.format == "tupe") check_shard_sets(files, headers);
  if (options.warn_unverified) note_unverified(options.split, files, headers, info.format);
  int64_t sequences = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    std::error_code ec;
    ShardSummary s;
    s.path = files[f];
    s.file_bytes = static_cast<int64_t>(fs::file_size(files[f], ec));
    if (on_demand) {
      const SampleIndex& index = sources[f]->index();
      s.sequences = index.size();
      s.tokens = index.tokens();
      s.index_hash = index.lengths_hash();
      s.checksums_hash = index.checksums_hash();
    } else {
      s.sequences = shards[f].size();
      s.tokens = shards[f].offsets.back();
      s.index_hash = fnv1a_lengths(shards[f].offsets);
      s.checksums_hash = shards[f].checksums_hash;
    }
    info.shards.push_back(s);
    sequences += s.sequences;
  }
  TUPE_CHECK(sequences > 0, files.front() << (files.size() > 1 ? " (and the other listed files)" : "") << ": the "
                                          << options.split << " shards hold no sequences");
  info.files = files;
  if (on_demand) return std::make_shared<OnDemandDataset>(std::move(info), std::move(sources), cache);
  return std::make_shared<ShardSetDataset>(std::move(info), std::move(shards));
}

}  // namespace tupe::data_pipeline
