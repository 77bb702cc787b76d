# TUPE-BERT for Hugging Face `transformers` (written by `tupe export`; load the folder with
# AutoModel / AutoModelForMaskedLM / AutoModelForSequenceClassification.from_pretrained(
# path, trust_remote_code=True)).
#
# tupe's own re-statement of the model it trains (tupe's model/*.h), in
# the names of tupe's checkpoints with "encoder." -> "tupe.", "mlm_head." -> "lm_head.",
# "sentence_head." -> "classifier.". Every constant comes from TupeConfig (config.json).
# Shape legend: B batch, L sequence length, d width, H heads, d_h = d / H, V vocabulary.
#
#   input:   e = LN(word[x] (+ position[t], BERT-A/R only) (+ segment[s])), then dropout
#   logits:  alpha = q k^T * word_term_scale + A + padding (-inf-like at padded keys)  (B, H, L, L)
#            A = reset_theta(P + B)  TUPE-R | reset_theta(P) TUPE-A | B  BERT-R
#                | -m_h |i - j|  ALiBi (alibi_slopes; symmetric, no [CLS] case, no parameters)
#                | 0  BERT-A, BERT-A^d, RoPE, NoPE
#            computed ONCE per forward (shared by every layer; differs across heads)
#            BERT-A^d: q = x W^Q + b^Q + pq, k = x W^K + b^K + pk, with pq = LN(p) U^Q + c^Q and
#            pk = LN(p) U^K + c^K (H, L, d_h), once per forward, shared by every layer, so that
#            q k^T holds all four word/position terms (word_term_scale = 1/sqrt(4 d_h))
#            RoPE: in every layer q <- q cos + rotate_half(q) sin, k likewise, rotate_half([x1 | x2])
#            = [-x2 | x1] over d_h's halves; cos, sin (L, d_h) of angle[t, i] = t theta_(i mod d_h/2),
#            theta_i = rope_base^(-2i/d_h), in float64 once per forward (rotary)
#            RoPE, ALiBi, NoPE (position_encoding rope | alibi | none): no position table and no
#            positional parameter, word_term_scale = 1/sqrt(d_h), no length limit (L may exceed
#            max_position_embeddings, the length trained on)
#   layer:   post-LN: x = LN(x + Attn(x)); x = LN(x + FFN(x))
#            pre-LN:  x = x + Attn(LN(x)); x = x + FFN(LN(x)); a final LN after the last layer
#   FFN(x) = GELU_erf(x W_1 + b_1) W_2 + b_2
#   MLM head: LN(GELU(h W_t + b_t)) E^T + b_V (decoder tied to the word embedding E)
#   classifier: (dropout(tanh(h_0 W_p + b_p))) W_c + b_c on the first ([CLS]) token
# hidden_states (output_hidden_states=True): the input of each layer, then last_hidden_state
# (for pre-LN that is after the final LN), num_hidden_layers + 1 tensors in all.
import math
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput, SequenceClassifierOutput

from .configuration_tupe import TupeConfig

try:  # transformers >= 5: these skip tensors already loaded from the checkpoint
    from transformers import initialization as _init
except ImportError:  # transformers 4.x
    from torch.nn import init as _init


def relative_buckets(relative, num_buckets, max_distance):
    """T5 bucket of each relative position r = j - i (int64 tensor), bidirectional.

    Half the buckets serve r <= 0, the other half (offset by num_buckets / 2) r > 0. Within a
    half, |r| < num_buckets / 4 ("exact") has its own bucket; larger |r| is binned on a log
    scale up to max_distance, the last bin taking everything beyond. With 32 buckets and 128:
    0: r = 0; 1..7: r = -1..-7; 8..15: [-8,-11] [-12,-15] [-16,-22] [-23,-31] [-32,-45]
    [-46,-63] [-64,-90] (<= -91); 16 never; 17..31 the same for r > 0. Computed in float64 with
    a 1e-9 guard so |r| = 16, 32, 64 fall exactly on their bins' lower edges.
    """
    half = num_buckets // 2
    exact = half // 2
    n = relative.abs()
    offset = torch.where(relative > 0, half, 0)
    ratio = n.clamp(min=1).to(torch.float64) / exact
    logbin = exact + torch.floor(torch.log(ratio) / math.log(max_distance / exact) * (half - exact) + 1e-9).long()
    logbin = logbin.clamp(max=half - 1)
    return offset + torch.where(n < exact, n, logbin)


def alibi_slopes(num_heads):
    """ALiBi's m_h (Press et al.), (H) float64: 2^(-8h/n), h = 1..n, for n the largest power of two
    <= H, then the odd-numbered slopes of the rule for 2n heads, 2^(-4(2k-1)/n), k = 1..H - n."""
    n = 1
    while n * 2 <= num_heads:
        n *= 2
    m = [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)] + [2.0 ** (-4.0 * (2 * k - 1) / n)
                                                             for k in range(1, num_heads - n + 1)]
    return torch.tensor(m, dtype=torch.float64)


def rotary(L, head_size, base, device=None):
    """RoPE's (cos, sin) of angle[t, i] = t theta_(i mod d_h/2), theta_i = base^(-2i/d_h), t < L:
    (L, d_h) each, float64."""
    i = torch.arange(head_size // 2, dtype=torch.float64, device=device)
    theta = torch.pow(torch.tensor(float(base), dtype=torch.float64, device=device), -2.0 * i / head_size)
    angle = torch.outer(torch.arange(L, dtype=torch.float64, device=device), theta)  # (L, d_h/2)
    angle = torch.cat((angle, angle), dim=-1)                                          # (L, d_h)
    return angle.cos(), angle.sin()


def rotate(x, cos, sin):
    """x cos + rotate_half(x) sin, rotate_half([x1 | x2]) = [-x2 | x1] over the last dim's halves.
    x (B, H, L, d_h); cos, sin broadcastable to it."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class TupeEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        d = config.hidden_size
        self.word = nn.Embedding(config.vocab_size, d)
        self.position = nn.Embedding(config.max_position_embeddings, d) if config.has_absolute_input_positions else None
        self.segment = nn.Embedding(config.type_vocab_size, d) if config.type_vocab_size > 0 else None
        self.ignores_token_type_ids = self.segment is None and config.ignores_token_type_ids
        self.norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids=None, inputs_embeds=None):
        e = self.word(input_ids) if inputs_embeds is None else inputs_embeds  # (B, L, d)
        L = e.shape[1]
        if self.position is not None:
            e = e + self.position.weight[:L].unsqueeze(0)
        if token_type_ids is not None and self.segment is None:
            if not self.ignores_token_type_ids:
                raise ValueError("TupeModel: token_type_ids given but the model has no segment embedding "
                                 "(type_vocab_size = 0, ignores_token_type_ids = false)")
        elif token_type_ids is not None:
            e = e + self.segment(token_type_ids)
        elif self.segment is not None:
            e = e + self.segment.weight[0]  # all-zero segment ids
        return self.dropout(self.norm(e))


class TupePositionalTerm(nn.Module):
    """The additive positional logits A (H, L, L), shared by all layers; None for BERT-A, BERT-A^d
    (whose projected positions query_key(L) gives), RoPE (whose rotation rotary gives) and NoPE."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        d, H = config.hidden_size, config.num_attention_heads
        if config.has_position_projections:
            self.table = nn.Embedding(config.position_table_size, d)  # p
            self.norm = nn.LayerNorm(d, eps=config.layer_norm_eps)    # LN over table rows
            self.query = nn.Linear(d, d)                              # U^Q, b^Q
            self.key = nn.Linear(d, d)                                # U^K, b^K
        if config.has_relative_bias:
            self.relative_bias = nn.Embedding(config.relative_bias_rows, H)  # b: (buckets + 1, H)

    def query_key(self, rows):
        """The projected table rows [0, rows), unscaled: (LN(p) U^Q + c^Q, LN(p) U^K + c^K), each (H, rows, d_h)."""
        c = self.config
        if rows > c.position_table_size:
            raise ValueError(f"TupeModel: sequence length {rows} exceeds the position table ({c.position_table_size} rows)")
        H, dh = c.num_attention_heads, c.hidden_size // c.num_attention_heads
        p = self.norm(self.table.weight[:rows])                      # (rows, d)
        pq = self.query(p).view(rows, H, dh).transpose(0, 1)          # (H, rows, d_h)
        pk = self.key(p).view(rows, H, dh).transpose(0, 1)            # (H, rows, d_h)
        return pq, pk

    def correlation(self, rows):
        """P over table rows [0, rows): (H, rows, rows), scaled by positional_term_scale."""
        pq, pk = self.query_key(rows)
        return torch.matmul(pq, pk.transpose(1, 2)) * self.config.positional_term_scale

    def forward(self, L, device=None):
        c = self.config
        if L > c.max_position_embeddings and not c.has_computed_positions:
            raise ValueError(f"TupeModel: sequence length {L} exceeds max_position_embeddings {c.max_position_embeddings}")
        if c.has_alibi:  # -m_h |i - j|, float64
            t = torch.arange(L, dtype=torch.float64, device=device)
            distance = (t.unsqueeze(1) - t.unsqueeze(0)).abs()                       # (L, L)
            return -alibi_slopes(c.num_attention_heads).to(device).view(-1, 1, 1) * distance  # (H, L, L)
        out = None
        if c.has_untied_positions:
            if c.untie_cls:
                P = self.correlation(L + 1)
                out = P[:, 1:, 1:].clone()  # position t uses table row t + 1
                out[:, 0, :] = P[:, 0, 0].unsqueeze(-1)   # theta_1: [CLS] -> every token
                out[:, 1:, 0] = P[:, 1, 1].unsqueeze(-1)  # theta_2: every other token -> [CLS]
            else:
                out = self.correlation(L)  # position t uses row t
        if c.has_relative_bias:
            pos = torch.arange(L, device=self.relative_bias.weight.device)
            buckets = relative_buckets(pos.unsqueeze(0) - pos.unsqueeze(1), c.relative_buckets,
                                       c.relative_max_distance)  # [i, j]: bucket of j - i
            if c.untie_cls:
                buckets[1:, 0] = c.cls_column_bucket
                buckets[0, :] = c.cls_row_bucket
            B = self.relative_bias(buckets).permute(2, 0, 1)  # (H, L, L)
            out = B if out is None else out + B
        return out


class TupeSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        d = config.hidden_size
        self.heads = config.num_attention_heads
        self.scale = config.word_term_scale
        self.query, self.key, self.value, self.output = (nn.Linear(d, d) for _ in range(4))
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, x, bias, positions=None, rotation=None):
        """positions: BERT-A^d's (pq, pk), each (1, H, L, d_h), added to q and k; rotation: RoPE's
        (cos, sin), each (1, 1, L, d_h), turning q and k; else None."""
        B, L, d = x.shape
        split = lambda t: t.view(B, L, self.heads, d // self.heads).transpose(1, 2)  # (B, H, L, d_h)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if positions is not None:
            q, k = q + positions[0], k + positions[1]
        if rotation is not None:
            q, k = rotate(q, *rotation), rotate(k, *rotation)
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        if bias is not None:
            scores = scores + bias
        probs = torch.softmax(scores, dim=-1)                      # (B, H, L, L)
        ctx = torch.matmul(self.dropout(probs), v)                 # (B, H, L, d_h)
        return self.output(ctx.transpose(1, 2).reshape(B, L, d)), probs


class TupeLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        d = config.hidden_size
        self.pre_ln = config.layer_norm_placement == "pre"
        self.attention = TupeSelfAttention(config)
        self.attention_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(d, config.intermediate_size)
        self.ffn_out = nn.Linear(config.intermediate_size, d)
        self.ffn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def ffn(self, h):
        return self.dropout(self.ffn_out(F.gelu(self.ffn_in(h))))

    def forward(self, x, bias, positions=None, rotation=None):
        if self.pre_ln:
            a, probs = self.attention(self.attention_norm(x), bias, positions, rotation)
            h = x + self.dropout(a)
            return h + self.ffn(self.ffn_norm(h)), probs
        a, probs = self.attention(x, bias, positions, rotation)
        h = self.attention_norm(x + self.dropout(a))
        return self.ffn_norm(h + self.ffn(h)), probs


class TupePreTrainedModel(PreTrainedModel):
    config_class = TupeConfig
    base_model_prefix = "tupe"
    supports_gradient_checkpointing = False

    def _init_weights(self, module):
        """tupe's init (docs/model.md): N(0, initializer_range) weights and tables, zero biases, LN 1/0."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            _init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                _init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            _init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.LayerNorm):
            _init.ones_(module.weight)
            _init.zeros_(module.bias)
        elif isinstance(module, TupeLMHead):
            _init.zeros_(module.bias)


class TupeModel(TupePreTrainedModel):
    """The encoder: last_hidden_state (B, L, d)."""

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = TupeEmbeddings(config)
        self.positional = TupePositionalTerm(config)
        self.layers = nn.ModuleList(TupeLayer(config) for _ in range(config.num_hidden_layers))
        pre = config.layer_norm_placement == "pre"
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if pre else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word

    def set_input_embeddings(self, value):
        self.embeddings.word = value

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        cfg = self.config
        output_attentions = cfg.output_attentions if output_attentions is None else output_attentions
        output_hidden_states = cfg.output_hidden_states if output_hidden_states is None else output_hidden_states
        return_dict = cfg.return_dict if return_dict is None else return_dict
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("TupeModel: give exactly one of input_ids and inputs_embeds")
        x = self.embeddings(input_ids, token_type_ids, inputs_embeds)  # (B, L, d)
        B, L = x.shape[:2]
        bias = self.positional(L, x.device)  # (H, L, L) or None
        if bias is not None:
            bias = bias.unsqueeze(0).to(x.dtype)  # (1, H, L, L)
        positions = None
        if cfg.has_positional_query_key:  # BERT-A^d: (1, H, L, d_h) each, for every layer
            positions = tuple(t.unsqueeze(0).to(x.dtype) for t in self.positional.query_key(L))
        rotation = None
        if cfg.has_rotary:  # RoPE: (1, 1, L, d_h) each, for every layer
            rotation = tuple(t.view(1, 1, L, -1).to(x.dtype)
                             for t in rotary(L, cfg.hidden_size // cfg.num_attention_heads, cfg.rope_base, x.device))
        if attention_mask is not None:
            pad = torch.zeros(B, 1, 1, L, dtype=x.dtype, device=x.device)
            pad = pad.masked_fill(attention_mask.view(B, 1, 1, L) == 0, torch.finfo(x.dtype).min)
            bias = pad if bias is None else bias + pad  # (B, H, L, L) or (B, 1, 1, L)
        hidden, attentions = [], []
        for layer in self.layers:
            hidden.append(x)
            x, probs = layer(x, bias, positions, rotation)
            attentions.append(probs)
        if self.final_norm is not None:
            x = self.final_norm(x)
        hidden.append(x)
        hidden_states = tuple(hidden) if output_hidden_states else None
        attentions = tuple(attentions) if output_attentions else None
        if not return_dict:
            return tuple(v for v in (x, hidden_states, attentions) if v is not None)
        return BaseModelOutput(last_hidden_state=x, hidden_states=hidden_states, attentions=attentions)


class TupeLMHead(nn.Module):
    """LN(GELU(h W_t + b_t)) E^T + b_V. The decoder's weight is tied to the word embedding E and
    its bias IS `bias` (b_V, one parameter under two names, as BERT's head), so
    resize_token_embeddings, which replaces the decoder by a resized Linear, resizes b_V too."""

    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)  # weight tied to E
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias

    def forward(self, h):
        return self.decoder(self.norm(F.gelu(self.dense(h))))  # (B, L, V), + b_V


class TupeForMaskedLM(TupePreTrainedModel):
    _tied_weights_keys = {"lm_head.decoder.weight": "tupe.embeddings.word.weight",
                          "lm_head.decoder.bias": "lm_head.bias"}

    def __init__(self, config):
        super().__init__(config)
        self.tupe = TupeModel(config)
        self.lm_head = TupeLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.lm_head.decoder

    def set_output_embeddings(self, value):
        """`value`: the resized decoder (resize_token_embeddings); b_V becomes its bias."""
        self.lm_head.decoder = value
        self.lm_head.bias = value.bias

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None, labels=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        return_dict = self.config.return_dict if return_dict is None else return_dict
        out = self.tupe(input_ids, attention_mask, token_type_ids, inputs_embeds, output_attentions,
                        output_hidden_states, return_dict=True)
        logits = self.lm_head(out.last_hidden_state)  # (B, L, V)
        loss = None
        if labels is not None:  # -100 = not a prediction target
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1).to(logits.device))
        if not return_dict:
            rest = tuple(v for v in (out.hidden_states, out.attentions) if v is not None)
            return ((loss,) if loss is not None else ()) + (logits,) + rest
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=out.attentions)


class TupeClassificationHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(p)
        self.out = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, h):
        return self.out(self.dropout(torch.tanh(self.dense(h[:, 0]))))  # first token: (B, num_labels)


class TupeForSequenceClassification(TupePreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.tupe = TupeModel(config)
        self.classifier = TupeClassificationHead(config)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None, labels=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        return_dict = self.config.return_dict if return_dict is None else return_dict
        out = self.tupe(input_ids, attention_mask, token_type_ids, inputs_embeds, output_attentions,
                        output_hidden_states, return_dict=True)
        logits = self.classifier(out.last_hidden_state)
        loss = None
        if labels is not None:
            labels = labels.to(logits.device)
            kind = self.config.problem_type
            if kind is None:  # as transformers' own heads decide it
                if self.num_labels == 1:
                    kind = "regression"
                elif labels.dtype in (torch.long, torch.int):
                    kind = "single_label_classification"
                else:
                    kind = "multi_label_classification"
            if kind == "regression":
                loss = F.mse_loss(logits.squeeze(-1), labels.squeeze(-1).to(logits.dtype))
            elif kind == "single_label_classification":
                loss = F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
            else:
                loss = F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        if not return_dict:
            rest = tuple(v for v in (out.hidden_states, out.attentions) if v is not None)
            return ((loss,) if loss is not None else ()) + (logits,) + rest
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                        attentions=out.attentions)


__all__ = ["TupeModel", "TupeForMaskedLM", "TupeForSequenceClassification", "TupePreTrainedModel"]
