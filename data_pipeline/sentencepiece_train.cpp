#include "data_pipeline/sentencepiece_train.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/error.h"
#include "common/log.h"
#include "common/sha256.h"

namespace tupe::data_pipeline {

namespace {

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

/// The sentences of the corpus in order, for SentencePiece's trainer, which pulls them one at a
/// time (done / value / Next). A reader thread streams the files (stream_documents) and keeps
/// at most kQueuedBatches batches of kBatchLines lines ahead. The reader's error ends the
/// sentences; error() holds it (status() tells the trainer). The destructor stops the reader.
class CorpusSentences final : public sentencepiece::SentenceIterator {
 public:
  static constexpr size_t kBatchLines = 4096, kQueuedBatches = 8;

  CorpusSentences(std::vector<InputFile> files, StreamOptions options)
      : files_(std::move(files)), options_(std::move(options)), reader_([this] { read_all(); }) {
    advance();
  }
  ~CorpusSentences() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    reader_.join();
  }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override {
    std::lock_guard<std::mutex> lock(m_);
    return error_.empty() ? sentencepiece::util::Status()
                          : sentencepiece::util::Status(sentencepiece::util::StatusCode::kDataLoss, error_);
  }
  /// The reader's error ("" when none), once done() is true.
  std::string error() const {
    std::lock_guard<std::mutex> lock(m_);
    return error_;
  }

 private:
  struct Stopped {};  ///< thrown inside the reader when the trainer is gone

  void advance() {
    if (done_) return;
    if (next_ == batch_.size()) {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return !queue_.empty() || finished_; });
      if (queue_.empty()) {
        done_ = true;
        current_.clear();
        if (error_.empty())
          log::info("vocab: read " + std::to_string(sentences_) + " sentences, " + mib(text_bytes_) +
                    " of text; SentencePiece trains");
        return;
      }
      batch_ = std::move(queue_.front());
      queue_.pop_front();
      next_ = 0;
      lock.unlock();
      cv_.notify_all();
    }
    current_ = std::move(batch_[next_++]);
    ++sentences_;
    text_bytes_ += static_cast<int64_t>(current_.size()) + 1;
  }

  void push(std::vector<std::string>& batch) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return queue_.size() < kQueuedBatches || stop_; });
    if (stop_) throw Stopped{};
    queue_.push_back(std::move(batch));
    batch.clear();
    lock.unlock();
    cv_.notify_all();
  }

  void read_all() {
    std::string error;
    try {
      std::vector<std::string> batch;
      DocumentCallbacks callbacks;
      callbacks.begin = [](int64_t) { return true; };
      callbacks.line = [&](std::string_view line) {
        batch.emplace_back(line);
        if (batch.size() == kBatchLines) push(batch);
      };
      for (const InputFile& file : files_) {
        StreamOptions o = options_;
        o.json_lines = file.json_lines;
        stream_documents(file, o, callbacks);
      }
      if (!batch.empty()) push(batch);
    } catch (const Stopped&) {
    } catch (const Error& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = std::string("internal error: ") + e.what();
    }
    {
      std::lock_guard<std::mutex> lock(m_);
      error_ = error;
      finished_ = true;
    }
    cv_.notify_all();
  }

  const std::vector<InputFile> files_;
  const StreamOptions options_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::vector<std::string>> queue_;  ///< guarded by m_
  bool finished_ = false, stop_ = false;        ///< guarded by m_
  std::string error_;                           ///< guarded by m_
  // The trainer's side (its thread only).
  std::vector<std::string> batch_;
  size_t next_ = 0;
  std::string current_;
  bool done_ = false;
  int64_t sentences_ = 0, text_bytes_ = 0;
  std::thread reader_;  ///< last: started once everything above exists
};


/// Writes `bytes` to `path` through "<path>.tmp" + rename.
void write_atomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TUPE_CHECK(out.good(), tmp << ": cannot create: " << std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out.good()) {
      std::remove(tmp.c_str());
      TUPE_FAIL(tmp << ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    TUPE_FAIL(path << ": cannot rename from " << tmp << ": " << ec.message());
  }
}

std::string vocab_listing_path(const std::string& model) {
  const std::string suffix = ".model";
  if (model.size() > suffix.size() && model.compare(model.size() - suffix.size(), suffix.size(), suffix) == 0)
    return model.substr(0, model.size() - suffix.size()) + ".vocab";
  return model + ".vocab";
}

}  // namespace

std::string to_string(SentencePieceModelType t) { return choice_word(t, kModelTypeWords); }

SentencePieceModelType parse_sentencepiece_model_type(const std::string& key, const std::string& text) {
  return parse_choice(key, text, kModelTypeWords);
}

void VocabOptions::check_values() const { fields().check(*this); }

void VocabOptions::validate() const {
  TUPE_CHECK(!split_comma_list(input).empty(), "vocab.input: no input file given");
  TUPE_CHECK(!model.empty(), "vocab.model: no output path given");
  check_values();
}

const FieldTable<VocabOptions>& VocabOptions::fields() {
  using S = VocabOptions;
  static const FieldTable<S> table = [] {
    FieldTable<S> t("vocab");
    t.path_list("input", &S::input, "",
                "text or JSON-lines files, plain, gzip or zstd, or folders of them (searched recursively), "
                "comma-separated; each non-blank line is a sentence")
        .choice("input_format", &S::input_format, kInputFormatWords, InputFormat::kAuto,
                "as preprocess.input_format: auto (JSON lines by name: .jsonl, .json, .ndjson, less .gz/.zst), "
                "text or jsonl")
        .text("text_field", &S::text_field, "text", "JSON lines: the key of each record's text (a string)")
        .not_empty()
        .path("model", &S::model, "", "output SentencePiece .model path (the piece list goes to <stem>.vocab)")
        .integer("vocab_size", &S::vocab_size, 8000, "ids",
                 "pieces in the model, the 5 special tokens included (> 5, fits int32)")
        .above(5)
        .below(2147483648.0)
        .choice("model_type", &S::model_type, kModelTypeWords, SentencePieceModelType::kUnigram,
                "the SentencePiece model trained")
        .boolean("lower_case", &S::lower_case, true, "fold case (SentencePiece rule nmt_nfkc_cf; else nmt_nfkc)")
        .real("character_coverage", &S::character_coverage, 0.9995, "fraction",
              "of the corpus' characters kept as pieces")
        .at_least(0.98)
        .at_most(1)
        .integer("max_sentence_bytes", &S::max_sentence_bytes, 16384, "bytes", "longer lines are skipped in training")
        .positive()
        .integer("input_sentence_size", &S::input_sentence_size, 0, "lines", "sampled for training; 0 = all")
        .at_least(0)
        .integer("num_threads", &S::num_threads, 1, "", "trainer threads")
        .at_least(1)
        .at_most(1024)
        .integer("seed", &S::seed, 1234, "", "random seed of SentencePiece's line sampling")
        .at_least(0)
        .below(4294967296.0);
    return t;
  }();
  return table;
}

SentencePieceTrainResult train_sentencepiece(const VocabOptions& options) {
  options.validate();
  std::vector<InputFile> files = list_input_files(split_comma_list(options.input));
  int64_t input_bytes = 0;
  for (InputFile& f : files) {
    f.json_lines = is_json_lines(f.path, options.input_format);
    input_bytes += f.size_bytes;
  }
  // The output folder first: a run must not train for an hour to find it cannot write.
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(options.model).has_parent_path() ? fs::path(options.model).parent_path() : ".";
  std::error_code ec;
  fs::create_directories(folder, ec);
  TUPE_CHECK(fs::is_directory(folder), folder.string() << ": cannot create the output folder ("
                                                       << (ec ? ec.message() : "a file of that name exists") << ")");
  TUPE_CHECK(::access(folder.c_str(), W_OK) == 0,
             folder.string() << ": cannot write in the output folder (" << std::strerror(errno) << ")");
  log::info("vocab: reading " + std::to_string(files.size()) + " input file(s), " + mib(input_bytes) + "; training a " +
            to_string(options.model_type) + " model of " + std::to_string(options.vocab_size) + " pieces");

  std::unordered_map<std::string, std::string> args = {
      {"model_prefix", ""},  // nothing written by SentencePiece: the model comes back serialised
      {"vocab_size", std::to_string(options.vocab_size)},
      {"model_type", to_string(options.model_type)},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"normalization_rule_name", options.lower_case ? "nmt_nfkc_cf" : "nmt_nfkc"},
      {"max_sentence_length", std::to_string(options.max_sentence_bytes)},
      {"input_sentence_size", std::to_string(options.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(options.num_threads)},
      {"pad_id", std::to_string(SentencePieceReservedIds::kPad)},
      {"pad_piece", "[PAD]"},
      {"unk_id", std::to_string(SentencePieceReservedIds::kUnk)},
      {"unk_piece", "[UNK]"},
      {"bos_id", std::to_string(SentencePieceReservedIds::kCls)},
      {"bos_piece", "[CLS]"},
      {"eos_id", std::to_string(SentencePieceReservedIds::kSep)},
      {"eos_piece", "[SEP]"},
      {"control_symbols", "[MASK]"},  // the next free id: 4
      {"minloglevel", "1"},           // warnings and errors only
  };
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(options.seed));
  std::string serialized;
  sentencepiece::util::Status status;
  {
    StreamOptions stream;
    stream.text_field = options.text_field;
    stream.documents = DocumentBoundary::kLine;  // every line a sentence; blank lines skipped
    CorpusSentences sentences(std::move(files), stream);
    status = sentencepiece::SentencePieceTrainer::Train(args, &sentences, &serialized);
    const std::string error = sentences.error();
    if (!error.empty()) TUPE_FAIL(error);  // the input's fault, named by file and line
  }
  TUPE_CHECK(status.ok(), options.model << ": SentencePiece training failed: " << status.ToString());
  TUPE_CHECK(!serialized.empty(), options.model << ": SentencePiece training returned no model");

  // Check the reserved ids on the model itself before anything is written.
  sentencepiece::SentencePieceProcessor sp;
  const auto loaded = sp.LoadFromSerializedProto(serialized);
  TUPE_CHECK(loaded.ok(), options.model << ": trained model does not load: " << loaded.ToString());
  const std::pair<const char*, int32_t> reserved[] = {{"[PAD]", SentencePieceReservedIds::kPad},
                                                      {"[UNK]", SentencePieceReservedIds::kUnk},
                                                      {"[CLS]", SentencePieceReservedIds::kCls},
                                                      {"[SEP]", SentencePieceReservedIds::kSep},
                                                      {"[MASK]", SentencePieceReservedIds::kMask}};
  for (const auto& [piece, id] : reserved)
    TUPE_CHECK(sp.IdToPiece(id) == piece, options.model << ": trained model has '" << sp.IdToPiece(id) << "' at id " << id
                                                        << ", expected " << piece);

  SentencePieceTrainResult result;
  result.model_path = options.model;
  result.vocab_path = vocab_listing_path(options.model);
  result.vocab_size = sp.GetPieceSize();
  std::string listing;
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    listing += sp.IdToPiece(id);
    listing += '\t';
    listing += std::to_string(sp.GetScore(id));
    listing += '\n';
  }
  write_atomically(result.vocab_path, listing);
  write_atomically(result.model_path, serialized);
  result.sha256 = sha256_hex(serialized);
  return result;
}

}  // namespace tupe::data_pipeline
