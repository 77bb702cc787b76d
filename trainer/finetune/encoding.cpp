#include "trainer/finetune/encoding.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <exception>
#include <thread>

#include "common/error.h"

namespace tupe::finetune {

bool truncate_longest_first(std::vector<int32_t>& a, std::vector<int32_t>& b, size_t max_tokens) {
  bool cut = false;
  while (a.size() + b.size() > max_tokens) {
    if (a.size() > b.size()) a.pop_back();
    else b.pop_back();
    cut = true;
  }
  return cut;
}

EncodedExample encode_example(const data_pipeline::Tokenizer& tokenizer, const std::string& a, const std::string& b,
                              bool pair, int64_t max_length) {
  const int64_t specials = pair ? 3 : 2;
  TUPE_CHECK(max_length >= specials, "encode: max_length " << max_length << " leaves no room for text ("
                                                           << specials << " special tokens)");
  const data_pipeline::SpecialTokens sp = tokenizer.special_tokens();
  std::vector<int32_t> ta = tokenizer.encode(a);
  std::vector<int32_t> tb = pair ? tokenizer.encode(b) : std::vector<int32_t>{};
  EncodedExample out;
  out.truncated = truncate_longest_first(ta, tb, static_cast<size_t>(max_length - specials));
  out.ids.reserve(ta.size() + tb.size() + static_cast<size_t>(specials));
  out.ids.push_back(sp.cls);
  out.ids.insert(out.ids.end(), ta.begin(), ta.end());
  out.ids.push_back(sp.sep);
  out.first_segment_length = static_cast<int32_t>(out.ids.size());
  if (pair) {
    out.ids.insert(out.ids.end(), tb.begin(), tb.end());
    out.ids.push_back(sp.sep);
  }
  return out;
}

EncodedSplit encode_split(const data_pipeline::Tokenizer& tokenizer, const TaskSpec& task, const SplitData& split,
                          bool pair, int64_t max_length, int num_threads) {
  const size_t n = split.examples.size();
  std::vector<EncodedExample> encoded(n);
  std::vector<std::string> errors(static_cast<size_t>(std::max(1, num_threads)));
  auto work = [&](size_t t, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const Example& ex = split.examples[i];
      try {
        encoded[i] = encode_example(tokenizer, ex.text_a, ex.text_b, pair, max_length);
      } catch (const std::exception& e) {
        errors[t] = split.path + ":" + std::to_string(ex.line) + ": " + e.what();
        return;
      }
    }
  };
  const size_t threads = std::min(errors.size(), std::max<size_t>(1, n));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back(work, t, n * t / threads, n * (t + 1) / threads);
  for (auto& th : pool) th.join();
  for (const auto& e : errors) TUPE_CHECK(e.empty(), e);

  EncodedSplit out;
  out.name = split.split;
  out.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Example& ex = split.examples[i];
    out.truncated += encoded[i].truncated ? 1 : 0;
    out.total_tokens += static_cast<int64_t>(encoded[i].ids.size());
    out.first_segment_length.push_back(encoded[i].first_segment_length);
    out.ids.push_back(std::move(encoded[i].ids));
    if (split.labelled && task.kind == TaskKind::kClassification) out.labels.push_back(ex.label);
    if (split.labelled && task.kind == TaskKind::kRegression) out.scores.push_back(ex.score);
    out.index.push_back(ex.index);
  }
  return out;
}

TaskBatch make_batch(const EncodedSplit& split, const std::vector<int64_t>& rows, int32_t pad_id, bool with_segments,
                     const c10::Device& device) {
  TUPE_CHECK(!rows.empty(), "make_batch: no rows");
  const int64_t B = static_cast<int64_t>(rows.size());
  int64_t L = 0;
  for (int64_t r : rows) L = std::max<int64_t>(L, static_cast<int64_t>(split.ids.at(static_cast<size_t>(r)).size()));
  at::Tensor ids = at::full({B, L}, static_cast<int64_t>(pad_id), at::kLong);
  at::Tensor mask = at::zeros({B, L}, at::kLong);
  at::Tensor seg = at::zeros({B, L}, at::kLong);
  auto ids_a = ids.accessor<int64_t, 2>();
  auto mask_a = mask.accessor<int64_t, 2>();
  auto seg_a = seg.accessor<int64_t, 2>();
  for (int64_t i = 0; i < B; ++i) {
    const size_t r = static_cast<size_t>(rows[static_cast<size_t>(i)]);
    const auto& row = split.ids[r];
    for (size_t t = 0; t < row.size(); ++t) {
      ids_a[i][static_cast<int64_t>(t)] = row[t];
      mask_a[i][static_cast<int64_t>(t)] = 1;
      seg_a[i][static_cast<int64_t>(t)] = static_cast<int64_t>(t) >= split.first_segment_length[r] ? 1 : 0;
    }
  }
  TaskBatch b;
  b.input_ids = ids.to(device);
  b.attention_mask = mask.to(device);
  if (with_segments) b.segment_ids = seg.to(device);
  if (!split.labels.empty()) {
    at::Tensor labels = at::empty({B}, at::kLong);
    int64_t* dst = labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < B; ++i) dst[i] = split.labels.at(static_cast<size_t>(rows[static_cast<size_t>(i)]));
    b.labels = labels.to(device);
  }
  if (!split.scores.empty()) {
    at::Tensor scores = at::empty({B}, at::kFloat);
    float* dst = scores.data_ptr<float>();
    for (int64_t i = 0; i < B; ++i) dst[i] = static_cast<float>(split.scores.at(static_cast<size_t>(rows[static_cast<size_t>(i)])));
    b.scores = scores.to(device);
  }
  return b;
}

}  // namespace tupe::finetune
