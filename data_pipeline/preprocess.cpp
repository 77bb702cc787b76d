#include "data_pipeline/preprocess.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include "common/error.h"
#include "common/log.h"
#include "common/sha256.h"
#include "data_pipeline/document_split.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {

void PreprocessOptions::validate() const { fields().check(*this); }

const FieldTable<PreprocessOptions>& PreprocessOptions::fields() {
  using P = PreprocessOptions;
  static const FieldTable<P> table = [] {
    FieldTable<P> t("preprocess");
    t.integer("max_seq_len", &P::max_seq_len, 128, "tokens", "sequence length incl. [CLS] and [SEP]")
        .at_least(8)
        .at_most(65535)
        .choice("packing", &P::packing, kPackingWords, Packing::kFullSentences,
                "full_sentences (RoBERTa FULL-SENTENCES, across documents) or document (within one document)")
        .choice("documents", &P::documents, kDocumentBoundaryWords, DocumentBoundary::kBlankLine,
                "document boundaries: blank lines (BERT's format) or one document per line")
        .real("validation_ratio", &P::validation_ratio, 0.01, "fraction",
              "of the documents sent to the validation split; 0 = none (a whole file as validation: split = "
              "validation)")
        .at_least(0)
        .below(1)
        .choice("split", &P::split, kSplitModeWords, SplitMode::kRatio,
                "documents split by validation_ratio (ratio), or every document into validation shards "
                "(validation, for a separate validation file)")
        .integer("num_shards", &P::num_shards, 1, "files", "train shards")
        .at_least(1)
        .at_most(99999)
        .integer("num_validation_shards", &P::num_validation_shards, 1, "files",
                 "validation shards (when validation_ratio > 0 or split = validation)")
        .at_least(1)
        .at_most(99999)
        .integer("seed", &P::seed, 12345, "", "seed of the train/validation split")
        .integer("piece_bytes", &P::piece_bytes, 0, "bytes",
                 "input per packing stream and unit of work; 0 = auto: 1 MiB, less for a small corpus so that each "
                 "shard gets at least 16 pieces (not under 64 KiB)")
        .at_least(1024)
        .or_zero()
        .integer("compression_level", &P::compression_level, 0, "",
                 "deflate level of the shards: 0 = unfiltered (read by file offset, fastest), 1..9 = smaller files "
                 "read through a cache")
        .at_least(0)
        .at_most(9)
        .choice("input_format", &P::input_format, kInputFormatWords, InputFormat::kAuto,
                "auto (JSON lines when a name, less .gz/.zst, ends in .jsonl, .json or .ndjson; else text), text, or "
                "jsonl (one JSON object per line, one document per record); gzip and zstd, Parquet and Arrow files are found by "
                "their first bytes")
        .text("text_field", &P::text_field, "text",
              "JSON lines: the key of each record's text (a string); Parquet and Arrow: the text column")
        .not_empty();
    return t;
  }();
  return table;
}

int64_t resolve_piece_bytes(const PreprocessOptions& config, int64_t input_bytes) {
  if (config.piece_bytes > 0) return config.piece_bytes;
  constexpr int64_t kMax = int64_t{1} << 20, kMin = int64_t{64} << 10, kPiecesPerShard = 16;
  int64_t shards = 1;
  if (config.writes_train()) shards = std::max(shards, config.num_shards);
  if (config.writes_validation()) shards = std::max(shards, config.num_validation_shards);
  const int64_t target = input_bytes / (kPiecesPerShard * shards);
  return std::clamp(target, kMin, kMax);
}

PreprocessPlan plan_preprocess(const std::vector<std::string>& inputs, const std::string& output_dir,
                               const PreprocessOptions& config) {
  config.validate();
  TUPE_CHECK(!output_dir.empty(), "preprocess: no output folder given (--output)");
  PreprocessPlan plan;
  plan.files = list_input_files(inputs);
  int64_t input_bytes = 0;
  for (const InputFile& file : plan.files) input_bytes += file.size_bytes;
  plan.piece_bytes = resolve_piece_bytes(config, input_bytes);
  for (size_t f = 0; f < plan.files.size(); ++f) {
    InputFile& file = plan.files[f];
    if (file.columnar != Columnar::kNone) {  // one piece per row group / record batch
      for (const ColumnarGroup& group : columnar_groups(file.path, file.columnar, config.text_field)) {
        plan.pieces.push_back({static_cast<int64_t>(f), group.offset, group.offset + group.bytes,
                               static_cast<int64_t>(plan.groups.size())});
        plan.groups.push_back(group);
      }
      continue;
    }
    file.json_lines = is_json_lines(file.path, config.input_format);
    if (file.compression != Compression::kNone) {
      plan.streamed.push_back(static_cast<int64_t>(f));
      continue;
    }
    for (int64_t b = 0; b < file.size_bytes; b += plan.piece_bytes)
      plan.pieces.push_back({static_cast<int64_t>(f), b, std::min(b + plan.piece_bytes, file.size_bytes)});
  }
  auto add = [&](const std::string& split, int64_t n) {
    for (int64_t s = 0; s < n; ++s)
      plan.jobs.push_back({split, s, n, (fs::path(output_dir) / shard_file_name(split, s, n)).string()});
  };
  if (config.writes_train()) add("train", config.num_shards);
  if (config.writes_validation()) add("validation", config.num_validation_shards);
  return plan;
}

std::vector<std::string> existing_shards(const std::string& output_dir) {
  static const std::regex name_re("(train|validation)-[0-9]{5}-of-[0-9]{5}\\.h5");
  std::vector<std::string> found;
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return found;
  for (const auto& e : fs::directory_iterator(output_dir, ec))
    if (std::regex_match(e.path().filename().string(), name_re)) found.push_back(e.path().string());
  std::sort(found.begin(), found.end());
  return found;
}

namespace {

ShardHeader make_header(const ShardJob& job, const PreprocessOptions& config, int64_t piece_bytes, const Tokenizer& tok,
                        const std::string& command_line, const std::string& run_id) {
  ShardHeader h;
  h.split = job.split;
  h.shard_index = job.shard_index;
  h.num_shards = job.num_shards;
  h.tokenizer_kind = tok.kind();
  h.vocab_size = tok.vocab_size();
  h.vocab_sha256 = tok.vocab_sha256();
  h.lower_case = tok.lower_case();
  h.special = tok.special_tokens();
  h.max_seq_len = config.max_seq_len;
  h.packing = to_string(config.packing);  // the shard header keeps the words
  h.documents = to_string(config.documents);
  h.command_line = command_line;
  h.seed = config.seed;
  h.validation_ratio = config.validation_ratio;
  h.piece_bytes = piece_bytes;
  h.split_rule = kSplitRuleDocumentText;
  h.run_id = run_id;
  return h;
}

/// The warnings about null values one rank prints; the rest are counted only.
constexpr int64_t kNullWarnings = 10;

/// This rank's streams (piece, index into `mine`) of columnar file f, in piece order: each
/// piece (row group / record batch) read once, its non-null rows one document each.
void pack_columnar_file(const PreprocessPlan& plan, const PreprocessOptions& config, const Tokenizer& tokenizer,
                        int64_t f, const std::vector<std::pair<int64_t, size_t>>& streams,
                        const std::vector<const ShardJob*>& mine, std::vector<std::unique_ptr<ShardWriter>>& writers,
                        PreprocessProgress& prog, const ProgressFn& progress, int64_t& nulls, int64_t& null_warnings) {
  const InputFile& input = plan.files[static_cast<size_t>(f)];
  ColumnarReader reader(input.path, input.columnar, config.text_field);
  ColumnarRows rows;
  int64_t rows_piece = -1;
  for (size_t si = 0; si < streams.size(); ++si) {
    const auto [p, k] = streams[si];
    const Piece& piece = plan.pieces[static_cast<size_t>(p)];
    const ColumnarGroup& group = plan.groups[static_cast<size_t>(piece.group)];
    if (p != rows_piece) {
      rows = ColumnarRows{};  // the previous group's buffers go first
      rows = reader.read(group);
      rows_piece = p;
    }
    if (rows.null_count > 0 && mine[k] == &plan.jobs[static_cast<size_t>(plan.first_job(p))]) {
      nulls += rows.null_count;
      if (null_warnings < kNullWarnings)
        log::warn(row_place(input.path, input.columnar, group, rows.first_null) + ": null in column \"" +
                  config.text_field + "\" (" + std::to_string(rows.null_count) +
                  (input.columnar == Columnar::kParquet ? " in this row group" : " in this record batch") +
                  "), skipped; the summary counts them all");
      else if (null_warnings == kNullWarnings)
        log::warn("preprocess: further null values are counted in the summary only");
      ++null_warnings;
    }
    const bool want_validation = mine[k]->split == "validation";
    ShardWriter& writer = *writers[k];
    SequencePacker packer(config.packing, config.max_seq_len, tokenizer.special_tokens(),
                          [&](const int32_t* ids, int64_t n) {
                            writer.append(ids, n);
                            ++prog.sequences;
                            prog.tokens += n;
                          });
    const auto add = [&](std::string_view line) { packer.add_tokens(tokenizer.encode(line)); };
    for (size_t i = 0; i < rows.texts.size(); ++i) {
      if (rows.null[i]) continue;
      DocumentDigest digest;
      if (split_needs_text(config))
        for_each_text_line(rows.texts[i], [&digest](std::string_view line) { digest.add_line(line); });
      if (goes_to_validation(config, digest) != want_validation) continue;
      packer.begin_document();
      for_each_text_line(rows.texts[i], add);
    }
    packer.finish();
    ++prog.pieces_done;
    if (si + 1 == streams.size() || streams[si + 1].first != p) prog.bytes_done += piece.end - piece.begin;
    if (progress) progress(prog);
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> describe_preprocess_run(const PreprocessPlan& plan,
                                                                         const PreprocessOptions& config,
                                                                         const Tokenizer& tokenizer,
                                                                         const std::string& output_dir) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : PreprocessOptions::fields().fields()) out.emplace_back("preprocess." + f.name, f.get(config));
  out.emplace_back("tokenizer", tokenizer.kind() + ", vocabulary " + std::to_string(tokenizer.vocab_size()) + " " +
                                    tokenizer.vocab_sha256() + (tokenizer.lower_case() ? ", lower-cased" : ", cased"));
  out.emplace_back("output", output_dir);
  out.emplace_back("split rule", kSplitRuleDocumentText);  // a new rule: another run id
  for (size_t i = 0; i < plan.files.size(); ++i)
    out.emplace_back("input " + std::to_string(i),
                     plan.files[i].path + ", " + std::to_string(plan.files[i].size_bytes) + " bytes, " +
                         (plan.files[i].columnar != Columnar::kNone ? to_string(plan.files[i].columnar)
                          : plan.files[i].json_lines                 ? "jsonl"
                                                                     : "text") +
                         ", " + to_string(plan.files[i].compression));
  return out;
}

std::string preprocess_run_id(const std::vector<std::pair<std::string, std::string>>& description,
                              const PreprocessPlan& plan) {
  std::string text;
  for (const auto& [k, v] : description) text += k + "=" + v + "\n";
  for (const auto& f : plan.files) {
    std::error_code ec;
    const auto t = fs::last_write_time(f.path, ec);
    text += "mtime " + f.path + "=" + (ec ? std::string("?") : std::to_string(t.time_since_epoch().count())) + "\n";
  }
  return sha256_hex(text).substr(0, 16);
}

std::vector<std::unique_ptr<ShardWriter>> run_preprocess_jobs(const PreprocessPlan& plan,
                                                              const PreprocessOptions& config,
                                                              const Tokenizer& tokenizer, int64_t rank,
                                                              int64_t world_size, const std::string& command_line,
                                                              const std::string& run_id, const ProgressFn& progress,
                                                              int64_t* null_values) {
  config.validate();
  TUPE_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
             "preprocess: rank " << rank << " outside world size " << world_size);
  ShardWriterOptions wopt;
  wopt.compression_level = config.compression_level;

  // This rank's jobs and their writers.
  std::vector<const ShardJob*> mine;
  std::vector<std::unique_ptr<ShardWriter>> writers;
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    if (static_cast<int64_t>(j) % world_size != rank) continue;
    mine.push_back(&plan.jobs[j]);
    writers.push_back(std::make_unique<ShardWriter>(plan.jobs[j].path,
                                                    make_header(plan.jobs[j], config, plan.piece_bytes, tokenizer, command_line, run_id), wopt));
  }
  // Progress: streams are (piece, shard) pairs; bytes count each piece this rank reads once
  // (a piece feeding a train and a validation shard is read once).
  PreprocessProgress prog;
  for (int64_t p = 0; p < static_cast<int64_t>(plan.pieces.size()); ++p) {
    bool read = false;
    for (const ShardJob* job : mine)
      if (plan.feeds(p, *job)) {
        ++prog.pieces_total;
        read = true;
      }
    if (read) prog.bytes_total += plan.pieces[static_cast<size_t>(p)].end - plan.pieces[static_cast<size_t>(p)].begin;
  }
  if (!mine.empty())
    for (const int64_t f : plan.streamed) {
      ++prog.pieces_total;
      prog.bytes_total += plan.files[static_cast<size_t>(f)].size_bytes;
    }
  if (progress) progress(prog);

  const SpecialTokens special = tokenizer.special_tokens();
  int64_t nulls = 0, null_warnings = 0;
  for (int64_t f = 0; f < static_cast<int64_t>(plan.files.size()); ++f) {
    // This rank's (piece, job) streams in this file, in piece order.
    std::vector<std::pair<int64_t, size_t>> streams;
    for (int64_t p = 0; p < static_cast<int64_t>(plan.pieces.size()); ++p)
      if (plan.pieces[static_cast<size_t>(p)].file == f)
        for (size_t k = 0; k < mine.size(); ++k)
          if (plan.feeds(p, *mine[k])) streams.emplace_back(p, k);
    if (streams.empty()) continue;
    const InputFile& input = plan.files[static_cast<size_t>(f)];
    if (input.columnar != Columnar::kNone) {
      pack_columnar_file(plan, config, tokenizer, f, streams, mine, writers, prog, progress, nulls, null_warnings);
      continue;
    }
    // One piece is read at a time (memory bounded whatever the file size); a piece feeding
    // a train and a validation shard of this rank is read once.
    PieceText text;
    int64_t text_piece = -1;
    std::vector<uint8_t> to_validation;  // per document of the piece (document_split.h)
    std::string record_text, record_error;
    // A JSON-lines record's text, or the error naming its line.
    const auto record_of = [&](const DocumentSpan& doc) -> const std::string& {
      const std::string_view record = std::string_view(text.bytes).substr(static_cast<size_t>(doc.begin),
                                                                          static_cast<size_t>(doc.end - doc.begin));
      TUPE_CHECK(json_record_text(record, config.text_field, record_text, record_error),
                 input.path << ": line " << line_number_at(input.path, text.base + doc.begin) << ": " << record_error);
      return record_text;
    };
    for (size_t si = 0; si < streams.size(); ++si) {
      const auto [p, k] = streams[si];
      const Piece& piece = plan.pieces[static_cast<size_t>(p)];
      if (p != text_piece) {
        text = read_piece(input.path, input.size_bytes, piece.begin, piece.end,
                          input.json_lines ? DocumentBoundary::kLine : config.documents, !input.json_lines);
        text_piece = p;
        TUPE_CHECK(piece.begin > 0 || !text.docs.empty() || file_has_text(input.path, input.size_bytes),
                   input.path << ": no text (only blank lines, spaces or control characters)");
        to_validation.assign(text.docs.size(), 0);
        for (size_t i = 0; i < text.docs.size(); ++i) {
          DocumentDigest digest;
          const auto add_line = [&digest](std::string_view line) { digest.add_line(line); };
          if (split_needs_text(config)) {
            if (input.json_lines)
              for_each_text_line(record_of(text.docs[i]), add_line);
            else
              for_each_line(text.bytes, text.docs[i], add_line);
          }
          to_validation[i] = goes_to_validation(config, digest) ? 1 : 0;
        }
      }
      const bool want_validation = mine[k]->split == "validation";
      ShardWriter& writer = *writers[k];
      SequencePacker packer(config.packing, config.max_seq_len, special, [&](const int32_t* ids, int64_t n) {
        writer.append(ids, n);
        ++prog.sequences;
        prog.tokens += n;
      });
      const auto add = [&](std::string_view line) { packer.add_tokens(tokenizer.encode(line)); };
      for (size_t i = 0; i < text.docs.size(); ++i) {
        if ((to_validation[i] != 0) != want_validation) continue;
        packer.begin_document();
        if (input.json_lines)
          for_each_text_line(record_of(text.docs[i]), add);
        else
          for_each_line(text.bytes, text.docs[i], add);
      }
      packer.finish();
      ++prog.pieces_done;
      if (si + 1 == streams.size() || streams[si + 1].first != p) prog.bytes_done += piece.end - piece.begin;
      if (progress) progress(prog);
    }
  }
  // The compressed files, read whole by every rank with shards; pieces numbered on.
  int64_t first_piece = static_cast<int64_t>(plan.pieces.size());
  for (const int64_t f : mine.empty() ? std::vector<int64_t>{} : plan.streamed) {
    const InputFile& input = plan.files[static_cast<size_t>(f)];
    std::vector<std::unique_ptr<SequencePacker>> packers(mine.size());  // of the current piece, per job
    int64_t current = -1;
    SequencePacker* target = nullptr;  // the packer of the current document, if it is this rank's
    // With a drawn split, a document's lines are held until its end (its digest decides the packer).
    bool held = false;
    DocumentDigest digest;
    std::vector<std::string> held_lines;
    const auto pick_target = [&](bool validation) {
      target = nullptr;
      for (size_t k = 0; k < mine.size(); ++k)
        if (packers[k] && (mine[k]->split == "validation") == validation) target = packers[k].get();
      if (target) target->begin_document();
    };
    const auto release_held = [&] {
      if (!held) return;
      held = false;
      pick_target(goes_to_validation(config, digest));
      if (target)
        for (const std::string& line : held_lines) target->add_tokens(tokenizer.encode(line));
      held_lines.clear();
      target = nullptr;
    };
    auto finish_piece = [&] {
      release_held();
      for (auto& p : packers)
        if (p) {
          p->finish();
          p.reset();
        }
    };
    DocumentCallbacks cb;
    cb.begin = [&](int64_t offset) {
      release_held();
      const int64_t piece = first_piece + offset / plan.piece_bytes;
      if (piece != current) {
        finish_piece();
        current = piece;
        for (size_t k = 0; k < mine.size(); ++k)
          if (plan.feeds(piece, *mine[k])) {
            ShardWriter& writer = *writers[k];
            packers[k] = std::make_unique<SequencePacker>(config.packing, config.max_seq_len, special,
                                                          [&writer, &prog](const int32_t* ids, int64_t n) {
                                                            writer.append(ids, n);
                                                            ++prog.sequences;
                                                            prog.tokens += n;
                                                          });
          }
      }
      if (!split_needs_text(config)) {
        pick_target(goes_to_validation(config, DocumentDigest{}));
        return target != nullptr;
      }
      held = std::any_of(packers.begin(), packers.end(), [](const auto& p) { return p != nullptr; });
      digest = DocumentDigest{};
      return held;
    };
    cb.line = [&](std::string_view line) {
      if (!held) {
        target->add_tokens(tokenizer.encode(line));
        return;
      }
      digest.add_line(line);
      held_lines.emplace_back(line);
    };
    const int64_t bytes_before = prog.bytes_done;
    cb.progress = [&](int64_t consumed) {
      prog.bytes_done = bytes_before + consumed;
      if (progress) progress(prog);
    };
    StreamOptions options;
    options.json_lines = input.json_lines;
    options.text_field = config.text_field;
    options.documents = config.documents;
    const int64_t text_bytes = stream_documents(input, options, cb);
    finish_piece();
    first_piece += (text_bytes + plan.piece_bytes - 1) / plan.piece_bytes;
    ++prog.pieces_done;
    prog.bytes_done = bytes_before + input.size_bytes;
    if (progress) progress(prog);
  }
  for (auto& w : writers) w->close();
  if (null_values) *null_values = nulls;
  return writers;
}

}  // namespace tupe::data_pipeline
