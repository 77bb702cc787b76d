// Real data: WikiText-2 test split (CRLF, ` = Heading = ` lines) with the BERT uncased vocab,
// preprocessed through the library once per test process. Round trip to the source text,
// packing, the train/validation split, and masking statistics.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <cmath>
#include <map>
#include <set>

#include "data_pipeline/corpus.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/preprocess.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "data_test_util.h"

namespace tupe::data_pipeline {
namespace {

/// Lower-cased, accents stripped (NFD minus non-spacing marks), control, format and white
/// space characters removed: BERT uncased's view of text with the spacing dropped.
std::string normalise(const std::string& utf8) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(err);
  EXPECT_TRUE(U_SUCCESS(err));
  const icu::UnicodeString decomposed = nfd->normalize(icu::UnicodeString::fromUTF8(utf8), err);
  icu::UnicodeString kept;
  for (int32_t i = 0; i < decomposed.length();) {
    const UChar32 c = decomposed.char32At(i);
    i += U16_LENGTH(c);
    const int8_t type = u_charType(c);
    if (type == U_NON_SPACING_MARK || type == U_CONTROL_CHAR || type == U_FORMAT_CHAR || u_isUWhiteSpace(c) ||
        c == 0xFFFD)
      continue;
    kept.append(u_tolower(c));
  }
  std::string out;
  kept.toUTF8String(out);
  return out;
}

struct Corpus {
  test::TempDir dir{"wikitext"};
  std::unique_ptr<Tokenizer> tokenizer;
  PreprocessOptions config;
  PreprocessPlan plan;
  std::shared_ptr<const PretrainDataset> train, validation;
  Corpus() {
    TokenizerOptions t;
    t.vocab = test::vocab_path();
    tokenizer = make_tokenizer(t);
    config.documents = DocumentBoundary::kLine;  // this copy of WikiText-2 has no blank lines: one paragraph per line
    config.validation_ratio = 0.05;
    config.num_shards = 2;
    config.piece_bytes = 256 << 10;
    plan = plan_preprocess({test::wikitext_test_path()}, dir.str(), config);
    auto writers = run_preprocess_jobs(plan, config, *tokenizer, 0, 1, "test", "", {});
    for (auto& w : writers) w->commit();
    DatasetOptions o;
    o.expected_vocab_sha256 = tokenizer->vocab_sha256();
    train = open_pretrain_dataset({dir.str()}, o);
    o.split = "validation";
    validation = open_pretrain_dataset({dir.str()}, o);
  }
};

const Corpus& corpus() {
  static const Corpus c;
  return c;
}

TEST(DataWikitext, OnDemandReadsEqualTheInMemoryReader) {
  const Corpus& c = corpus();
  DatasetOptions o;
  o.in_memory = true;
  for (const char* split : {"train", "validation"}) {
    SCOPED_TRACE(split);
    o.split = split;
    const auto want = open_pretrain_dataset({c.dir.str()}, o);
    const auto& got = std::string(split) == "train" ? c.train : c.validation;
    ASSERT_EQ(got->size(), want->size());
    EXPECT_EQ(describe_shards(got->info(), split), describe_shards(want->info(), split));
    Sample a, b;
    for (int64_t i = 0; i < got->size(); ++i) {
      got->get(i, a);
      want->get(i, b);
      ASSERT_EQ(a.token_ids, b.token_ids) << i;
      ASSERT_EQ(got->ordinary_tokens(i), want->ordinary_tokens(i)) << i;
    }
  }
}

TEST(DataWikitext, DetokenisedSamplesAreFoundInTheSource) {
  const Corpus& c = corpus();
  const std::string source = normalise(read_file_bytes(test::wikitext_test_path()));
  ASSERT_GT(source.size(), 1000000u);
  const SpecialTokens sp = c.tokenizer->special_tokens();
  Sample s;
  int checked = 0;
  for (const auto* ds : {c.train.get(), c.validation.get()}) {
    for (int64_t i = 0; i < ds->size(); i += std::max<int64_t>(1, ds->size() / 40)) {
      ds->get(i, s);
      // Runs of ordinary tokens (specials split them: [SEP] between documents, [UNK]).
      std::vector<int32_t> run;
      auto check = [&] {
        if (run.size() >= 8) {
          const std::string text = normalise(c.tokenizer->decode(run));
          EXPECT_NE(source.find(text), std::string::npos) << "sample " << i << ": '" << text << "'";
          ++checked;
        }
        run.clear();
      };
      for (const int32_t id : s.token_ids) {
        if (id == sp.cls || id == sp.sep || id == sp.unk || id == sp.pad) check();
        else run.push_back(id);
      }
      check();
    }
  }
  EXPECT_GT(checked, 60);
}

TEST(DataWikitext, FullSentencePackingAndSplit) {
  const Corpus& c = corpus();
  const int64_t streams = static_cast<int64_t>(c.plan.pieces.size());  // per split
  for (const auto* ds : {c.train.get(), c.validation.get()}) {
    int64_t short_seqs = 0;
    for (int64_t i = 0; i < ds->size(); ++i) short_seqs += ds->length(i) < 127;
    // Every sequence is full (128, or 127 closed before a separator) except the last of a stream.
    EXPECT_LE(short_seqs, streams);
    EXPECT_EQ(ds->info().max_seq_len, 128);
    EXPECT_EQ(ds->info().vocab_size, 30522);
  }
  // About 5 % of the documents (and so of the tokens) go to validation.
  const double share = static_cast<double>(c.validation->size()) / static_cast<double>(c.train->size() + c.validation->size());
  EXPECT_GT(share, 0.02);
  EXPECT_LT(share, 0.09);
  // Every token of the source is kept: the ordinary tokens of the shards are those of the
  // tokenizer run over every line.
  const std::string bytes = read_file_bytes(test::wikitext_test_path());
  int64_t expected = 0;
  for (const auto& d : split_documents("wiki", bytes, DocumentBoundary::kLine))
    for_each_line(bytes, d, [&](std::string_view line) { expected += static_cast<int64_t>(c.tokenizer->encode(line).size()); });
  int64_t got = 0;
  Sample s;
  const SpecialTokens sp = c.tokenizer->special_tokens();
  for (const auto* ds : {c.train.get(), c.validation.get()})
    for (int64_t i = 0; i < ds->size(); ++i) {
      ds->get(i, s);
      for (const int32_t id : s.token_ids) got += id != sp.cls && id != sp.sep;
    }
  EXPECT_EQ(got, expected);
}

TEST(DataWikitext, MaskingStatisticsOnRealData) {
  const Corpus& c = corpus();
  const SpecialTokens sp = c.tokenizer->special_tokens();
  DataOptions cfg;
  cfg.global_batch_size = 64;
  cfg.num_threads = 2;
  Loader loader(c.train, cfg, 0, 1);
  int64_t masked = 0, as_mask = 0, as_random = 0, unchanged = 0, candidates = 0;
  Sample s;
  for (int64_t step = 0; step < loader.steps_per_epoch(); ++step) {
    const MlmBatch b = loader.next();
    const int64_t len = b.input_ids.size(1);
    const auto* ids = b.input_ids.data_ptr<int64_t>();
    const auto* pos = b.masked_positions.data_ptr<int64_t>();
    const auto* lab = b.masked_labels.data_ptr<int64_t>();
    std::vector<int64_t> per_row(static_cast<size_t>(b.rows()), 0);
    for (int64_t k = 0; k < b.masked_positions.size(0); ++k) {
      const int64_t row = pos[k] / len, col = pos[k] % len;
      ASSERT_EQ(b.attention_mask[row][col].item<int64_t>(), 1) << "never padding";
      ASSERT_FALSE(lab[k] == sp.cls || lab[k] == sp.sep || lab[k] == sp.pad || lab[k] == sp.unk || lab[k] == sp.mask)
          << "never a special token";
      ++per_row[static_cast<size_t>(row)];
      if (ids[pos[k]] == sp.mask) ++as_mask;
      else if (ids[pos[k]] == lab[k]) ++unchanged;
      else ++as_random;
    }
    masked += b.masked_positions.size(0);
    for (int64_t r = 0; r < b.rows(); ++r) {
      c.train->get(b.sample_indices[r].item<int64_t>(), s);
      int64_t cand = 0;
      for (const int32_t id : s.token_ids) cand += id != sp.cls && id != sp.sep && id != sp.unk;
      candidates += cand;
      EXPECT_EQ(per_row[static_cast<size_t>(r)], std::max<int64_t>(1, std::llround(0.15 * static_cast<double>(cand))));
    }
  }
  ASSERT_GT(masked, 20000);
  const double m = static_cast<double>(masked);
  EXPECT_NEAR(m / static_cast<double>(candidates), 0.15, 0.002);
  // 80/10/10 within 5 binomial standard deviations.
  for (const auto& [count, p] : std::vector<std::pair<int64_t, double>>{{as_mask, 0.8}, {as_random, 0.1}, {unchanged, 0.1}})
    EXPECT_NEAR(static_cast<double>(count) / m, p, 5 * std::sqrt(p * (1 - p) / m)) << p;
}

TEST(DataWikitext, SameSampleSameMaskOtherEpochOtherMask) {
  const Corpus& c = corpus();
  DataOptions cfg;
  cfg.global_batch_size = 32;
  const int64_t steps = Loader(c.train, cfg, 0, 1).steps_per_epoch();
  // The masks of each sample in epoch 0 (one run) and epoch 1 (a run resumed at epoch 1).
  auto masks_by_sample = [&](LoaderState start, int64_t threads) {
    cfg.num_threads = threads;
    Loader loader(c.train, cfg, 0, 1, start);
    std::map<int64_t, std::vector<int64_t>> out;
    for (int64_t t = 0; t < steps; ++t) {
      const MlmBatch b = loader.next();
      const int64_t len = b.input_ids.size(1);
      for (int64_t k = 0; k < b.masked_positions.size(0); ++k) {
        const int64_t p = b.masked_positions[k].item<int64_t>();
        out[b.sample_indices[p / len].item<int64_t>()].push_back(p % len * 100000 + b.input_ids.view(-1)[p].item<int64_t>());
      }
    }
    return out;
  };
  const auto e0 = masks_by_sample({0, 0}, 0);
  const auto e0_again = masks_by_sample({0, 0}, 3);
  const auto e1 = masks_by_sample({1, 0}, 1);
  EXPECT_EQ(e0, e0_again);
  int64_t same = 0, both = 0;
  for (const auto& [idx, m] : e0) {
    auto it = e1.find(idx);
    if (it == e1.end()) continue;
    ++both;
    same += it->second == m;
  }
  EXPECT_GT(both, 100);
  EXPECT_EQ(same, 0) << "each sample gets a new mask in a new epoch";
}

}  // namespace
}  // namespace tupe::data_pipeline
