// tupe verify's check of shard sets (shard_verify.h).
#include "data_pipeline/shard_verify.h"

#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "data_pipeline/on_demand.h"
#include "data_pipeline/shard_readers.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {

namespace {

/// Length-prefixed fields: "<bytes>:<text>" each.
class FieldWriter {
 public:
  FieldWriter& put(const std::string& v) {
    out_ += std::to_string(v.size());
    out_ += ':';
    out_ += v;
    return *this;
  }
  FieldWriter& put(int64_t v) { return put(std::to_string(v)); }
  FieldWriter& put(double v) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    return put(os.str());
  }
  std::string str() const { return out_; }

 private:
  std::string out_;
};

class FieldReader {
 public:
  explicit FieldReader(const std::string& in) : in_(in) {}
  std::string text() {
    const size_t colon = in_.find(':', at_);
    TUPE_CHECK(colon != std::string::npos, "verify: a rank's verdict is cut short (internal)");
    const size_t n = std::stoull(in_.substr(at_, colon - at_));
    TUPE_CHECK(colon + 1 + n <= in_.size(), "verify: a rank's verdict is cut short (internal)");
    std::string v = in_.substr(colon + 1, n);
    at_ = colon + 1 + n;
    return v;
  }
  int64_t integer() { return std::stoll(text()); }
  double real() { return std::stod(text()); }
  bool done() const { return at_ >= in_.size(); }

 private:
  const std::string& in_;
  size_t at_ = 0;
};

/// `problem` without a leading "<path>: ".
std::string after_path(const std::string& problem, const std::string& path) {
  const std::string prefix = path + ": ";
  return problem.rfind(prefix, 0) == 0 ? problem.substr(prefix.size()) : problem;
}

}  // namespace

std::string ShardVerdict::encode() const {
  FieldWriter w;
  w.put(path).put(file_bytes).put(format).put(int64_t{readable}).put(problem).put(samples).put(bad_samples);
  w.put(int64_t{verified});
  const ShardHeader& h = header;
  w.put(h.format_version).put(h.split).put(h.shard_index).put(h.num_shards).put(h.tokenizer_kind).put(h.vocab_size);
  w.put(h.vocab_sha256).put(int64_t{h.lower_case});
  w.put(int64_t{h.special.pad}).put(int64_t{h.special.unk}).put(int64_t{h.special.cls}).put(int64_t{h.special.sep});
  w.put(int64_t{h.special.mask});
  w.put(h.max_seq_len).put(h.packing).put(h.documents).put(h.num_sequences).put(h.num_tokens).put(h.command_line);
  w.put(h.seed).put(h.validation_ratio).put(h.piece_bytes).put(h.run_id).put(h.split_rule);
  return w.str();
}

ShardVerdict ShardVerdict::decode(const std::string& bytes) {
  FieldReader r(bytes);
  ShardVerdict v;
  v.path = r.text();
  v.file_bytes = r.integer();
  v.format = r.text();
  v.readable = r.integer() != 0;
  v.problem = r.text();
  v.samples = r.integer();
  v.bad_samples = r.integer();
  v.verified = r.integer() != 0;
  ShardHeader& h = v.header;
  h.format_version = r.integer();
  h.split = r.text();
  h.shard_index = r.integer();
  h.num_shards = r.integer();
  h.tokenizer_kind = r.text();
  h.vocab_size = r.integer();
  h.vocab_sha256 = r.text();
  h.lower_case = r.integer() != 0;
  h.special.pad = static_cast<int32_t>(r.integer());
  h.special.unk = static_cast<int32_t>(r.integer());
  h.special.cls = static_cast<int32_t>(r.integer());
  h.special.sep = static_cast<int32_t>(r.integer());
  h.special.mask = static_cast<int32_t>(r.integer());
  h.max_seq_len = r.integer();
  h.packing = r.text();
  h.documents = r.text();
  h.num_sequences = r.integer();
  h.num_tokens = r.integer();
  h.command_line = r.text();
  h.seed = r.integer();
  h.validation_ratio = r.real();
  h.piece_bytes = r.integer();
  h.run_id = r.text();
  h.split_rule = r.text();
  return v;
}

ShardVerdict verify_shard_file(const std::string& path, int64_t block_bytes) {
  ShardVerdict v;
  v.path = path;
  std::error_code ec;
  v.file_bytes = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) v.file_bytes = 0;
  try {
    v.format = detect_shard_format(path);
    const auto cache = std::make_shared<BlockCache>(int64_t{64} << 20);
    std::unique_ptr<ShardSource> source;
    DatasetOptions options;
    if (v.format == "tupe") {
      source = open_own_shard_on_demand(path, options, v.header, cache, 0);
    } else {
      options.vocab_size = int64_t{1} << 31;  // NVIDIA shards record no vocabulary: ids are not range-checked
      int64_t seq = 0;
      source = open_nvidia_shard_on_demand(path, options, seq, cache, 0);
    }
    v.readable = true;
    v.verified = source->index().verified();
    const ScanResult scan = source->scan(block_bytes);
    v.samples = scan.samples;
    v.bad_samples = scan.bad;
    if (scan.bad > 0) {
      std::ostringstream os;
      os << path << ": " << scan.bad << " of " << scan.samples << " samples fail their check; the first: "
         << after_path(scan.first_problem, path);
      v.problem = os.str();
    }
  } catch (const Error& e) {
    v.problem = e.what();
    if (v.problem.rfind(path, 0) != 0) v.problem = path + ": " + v.problem;
  }
  return v;
}

VerifyReport make_verify_report(const std::vector<std::string>& files, const std::vector<ShardVerdict>& verdicts) {
  TUPE_CHECK(files.size() == verdicts.size(), "verify: " << verdicts.size() << " verdicts for " << files.size()
                                                         << " files (internal)");
  VerifyReport r;
  r.files = static_cast<int64_t>(files.size());
  std::vector<std::string> set_files;
  std::vector<ShardHeader> set_headers;
  std::vector<std::string> mismatches;
  const ShardVerdict* first = nullptr;  // the first readable file: the others must agree with it
  for (const ShardVerdict& v : verdicts) {
    r.samples += v.samples;
    r.file_bytes += v.file_bytes;
    if (!v.problem.empty()) {
      r.lines.push_back(v.problem);
      ++r.damaged_files;
    }
    if (!v.readable) continue;
    if (!v.verified) ++r.unverified_files;
    if (!first) {
      first = &v;
    } else if (v.format != first->format) {
      mismatches.push_back(v.path + ": is a " + v.format + " shard but " + first->path + " is a " + first->format +
                           " shard");
    } else if (v.format == "tupe") {
      const std::string m = shard_header_mismatch(v.path, v.header, first->path, first->header);
      if (!m.empty()) mismatches.push_back(m);
    }
    if (v.format == "tupe") {
      set_files.push_back(v.path);
      set_headers.push_back(v.header);
    }
  }
  for (auto& line : shard_set_problems(set_files, set_headers)) mismatches.push_back(std::move(line));
  r.set_problems = static_cast<int64_t>(mismatches.size());
  for (auto& line : mismatches) r.lines.push_back(std::move(line));
  std::ostringstream os;
  os << "verify: " << r.files << " shard file" << (r.files == 1 ? "" : "s") << ", " << r.samples << " samples";
  if (r.damaged())
    os << ": " << r.damaged_files << " damaged file" << (r.damaged_files == 1 ? "" : "s") << ", " << r.set_problems
       << " set problem" << (r.set_problems == 1 ? "" : "s");
  else
    os << ": whole; every sample matches its checksum";
  if (r.unverified_files > 0)
    os << " (" << r.unverified_files << " file" << (r.unverified_files == 1 ? "" : "s")
       << " without checksums: NVIDIA shards or format version < " << kFirstVerifiedShardVersion
       << ", their rows checked for shape and range only)";
  r.summary = os.str();
  return r;
}

VerifyReport verify_shard_set(const std::vector<std::string>& files, int rank, int world, const GatherStrings& gather) {
  TUPE_CHECK(world >= 1 && rank >= 0 && rank < world, "verify: rank " << rank << " of " << world << " (internal)");
  std::string mine;
  for (size_t i = static_cast<size_t>(rank); i < files.size(); i += static_cast<size_t>(world)) {
    const std::string one = verify_shard_file(files[i]).encode();
    mine += std::to_string(i) + ":" + std::to_string(one.size()) + ":" + one;
  }
  const std::vector<std::string> all = world == 1 ? std::vector<std::string>{mine} : gather(mine);
  std::vector<ShardVerdict> verdicts(files.size());
  std::vector<bool> seen(files.size(), false);
  for (const std::string& text : all) {
    size_t at = 0;
    while (at < text.size()) {
      const size_t c1 = text.find(':', at), c2 = text.find(':', c1 + 1);
      TUPE_CHECK(c1 != std::string::npos && c2 != std::string::npos, "verify: a rank's verdicts are cut short (internal)");
      const size_t i = std::stoull(text.substr(at, c1 - at)), n = std::stoull(text.substr(c1 + 1, c2 - c1 - 1));
      TUPE_CHECK(i < files.size() && c2 + 1 + n <= text.size(), "verify: a rank's verdicts are cut short (internal)");
      verdicts[i] = ShardVerdict::decode(text.substr(c2 + 1, n));
      seen[i] = true;
      at = c2 + 1 + n;
    }
  }
  for (size_t i = 0; i < files.size(); ++i)
    TUPE_CHECK(seen[i], "verify: no rank checked " << files[i] << " (internal)");
  return make_verify_report(files, verdicts);
}

}  // namespace tupe::data_pipeline
