#include "trainer/pretrain/flops.h"

#include <ATen/ATen.h>

#include "common/error.h"

namespace tupe::pretrain {

double training_flops_per_token(const model::ModelOptions& c, int64_t seq_len, int64_t micro_batch_rows,
                                double masked_per_token) {
  TUPE_CHECK(seq_len >= 1 && micro_batch_rows >= 1, "flops: sequence length " << seq_len << " and micro-batch rows "
                                                                              << micro_batch_rows << " must be positive");
  TUPE_CHECK(masked_per_token >= 0 && masked_per_token <= 1,
             "flops: masked tokens per token must be in [0, 1], got " << masked_per_token);
  const double d = static_cast<double>(c.hidden_size), f = static_cast<double>(c.ffn_size);
  const double L = static_cast<double>(seq_len), V = static_cast<double>(c.vocab_size);
  double forward = static_cast<double>(c.num_layers) * (8 * d * d + 4 * d * f + 4 * L * d);
  if (c.has_untied_positions())
    forward += (4 * d * d + 2 * L * d) / static_cast<double>(micro_batch_rows);
  else if (c.has_positional_query_key())
    forward += 4 * d * d / static_cast<double>(micro_batch_rows);
  forward += masked_per_token * (2 * d * d + 2 * d * V);
  return 3 * forward;
}

double table_peak_tflops(const std::string& name, trainer::Precision precision, bool tf32) {
  struct Row {
    const char* key;
    const char* also;  ///< a second substring that must appear too ("" = none)
    double half, tf32, fp32;
  };
  static const Row rows[] = {
      {"H100", "PCIe", 756.0, 378.0, 51.2},
      {"H100", "", 989.4, 494.7, 66.9},
      {"H200", "", 989.4, 494.7, 66.9},
      {"A100", "", 312.0, 156.0, 19.5},
  };
  for (const Row& r : rows) {
    if (name.find(r.key) == std::string::npos) continue;
    if (*r.also != '\0' && name.find(r.also) == std::string::npos) continue;
    if (precision != trainer::Precision::kFp32) return r.half;
    return tf32 ? r.tf32 : r.fp32;
  }
  return 0.0;
}

}  // namespace tupe::pretrain
