// Model FLOPs utilisation: the FLOPs a training step executes per token, and the peak the
// device offers in the run's precision.
//
// FLOPs as executed (a multiply-add = 2 FLOPs; d width, f FFN width, L padded length, V
// vocabulary, b rows in one micro-batch forward, m = masked tokens per token, N layers):
//   per token and layer:  Q, K, V, O projections 8 d^2 + FFN 4 d f + scores and
//                         weighted sum 4 L d (the encoder runs over the padded length)
//   TUPE's positional term, once per micro-batch forward on every rank (shared by its b
//                         rows and all layers): U^Q, U^K projections of the L positions
//                         4 L d^2 and their correlation 2 L^2 d, i.e. (4 d^2 + 2 L d) / b
//                         per token (TUPE-A/R only; BERT-R's relative bias is a table lookup)
//   BERT-A^d's projected positions, once per micro-batch forward likewise: U^Q, U^K of the
//                         L positions, 4 d^2 / b per token (added to q and k, no L x L term)
//   MLM head, only at the masked positions: dense 2 d^2 + tied decoder 2 d V, times m
//   forward F = N (8 d^2 + 4 d f + 4 L d) + positional + m (2 d^2 + 2 d V); a training
//   step costs 3 F (backward = 2 forward). Embedding lookups, LayerNorm, softmax, GELU
//   and the optimizer are not counted (as in PaLM's and Megatron's MFU).
// MFU = 3 F x tokens/s / (ranks x peak).
#pragma once
#include <cstdint>
#include <string>

#include "model/config.h"
#include "trainer/options.h"

namespace tupe::pretrain {

/// 3 F above (FLOPs per padded token of one training step); `micro_batch_rows` = b, the rows
/// of one forward (the positional term is paid once per forward). Throws tupe::Error for
/// seq_len < 1, micro_batch_rows < 1 or masked_per_token outside [0, 1].
double training_flops_per_token(const model::ModelOptions& config, int64_t seq_len, int64_t micro_batch_rows,
                                double masked_per_token);

/// Dense peak TFLOP/s of a GPU named `device_name` (as CUDA reports it) in `precision`
/// (bf16/fp16: tensor cores; fp32: TF32 tensor cores when `tf32`, else plain fp32), from the
/// vendors' datasheets: A100 312 / 156 / 19.5; H100 SXM and H200 989 / 495 / 67; H100 PCIe
/// 756 / 378 / 51. 0 for a GPU not in the table.
double table_peak_tflops(const std::string& device_name, trainer::Precision precision, bool tf32);


}  // namespace tupe::pretrain
