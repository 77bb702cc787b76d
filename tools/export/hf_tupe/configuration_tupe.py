# Configuration of TUPE-BERT for Hugging Face `transformers` (written by `tupe export`).
#
# TUPE (Ke, He, Liu, "Rethinking Positional Encoding in Language Pre-training", ICLR 2021)
# unties the positional term from the word term in the attention logits. This file, and
# modeling_tupe.py beside it, are tupe's own re-statement of the model it trains (the math is
# in tupe's model/positional.h); every constant of that math is a field
# here, so a reader of config.json needs no other source:
#   alpha_ij = (x_i W^Q)(x_j W^K)^T * word_term_scale + reset_theta(P + B)_ij
#   P_h[i, j] = (LN(p_i) U^Q_h + b^Q_h) . (LN(p_j) U^K_h + b^K_h) * positional_term_scale
#   B_h[i, j] = b[bucket(j - i), h]   (T5 buckets, bidirectional; not scaled)
# and for BERT-A^d (bert-absolute-untied; the paper's Sec. 4.3), all four word/position terms:
#   alpha_ij = (x_i W^Q + pq_i)(x_j W^K + pk_j)^T * word_term_scale   (1/sqrt(4 d_h))
#   pq_i = LN(p_i) U^Q + b^Q,  pk_j = LN(p_j) U^K + b^K   (shared by all layers)
# and for the three without any position table or positional parameter (word_term_scale 1/sqrt(d_h)):
#   rope:   alpha_ij = (R_i q_i) . (R_j k_j) * word_term_scale, R_t turning feature pair (i, i + d_h/2)
#           by t * rope_base^(-2i/d_h) (RoFormer, half-split pairing), in every layer
#   alibi:  alpha_ij = q_i . k_j * word_term_scale - m_h |i - j|   (m_h: modeling_tupe.alibi_slopes)
#   none:   alpha_ij = q_i . k_j * word_term_scale   (NoPE)
# Loaded with `trust_remote_code=True` through the "auto_map" of config.json.
from transformers import PretrainedConfig

VARIANTS = ("tupe-absolute", "tupe-relative", "bert-absolute", "bert-relative", "bert-absolute-untied", "rope", "alibi",
            "none")
COMPUTED = ("rope", "alibi", "none")  # positions computed for any length: no table, no parameters


class TupeConfig(PretrainedConfig):
    """TUPE-BERT configuration. Fields (sizes in elements, lengths in tokens):

    vocab_size, hidden_size (d), num_hidden_layers, num_attention_heads (H, d_h = d / H),
    intermediate_size (FFN width), max_position_embeddings (longest sequence L; for rope, alibi
    and none the length trained on, not a limit),
    type_vocab_size (segment ids; 0 = no segment embedding), hidden_dropout_prob,
    attention_probs_dropout_prob, layer_norm_eps (every LayerNorm), initializer_range.
    position_encoding: tupe-absolute | tupe-relative | bert-absolute | bert-relative |
      bert-absolute-untied (BERT-A^d: word-only input, the position table's own projections
      added to every layer's query and key) | rope | alibi | none (RoPE, ALiBi, NoPE: no position
      table, no positional parameter; they run sequences longer than max_position_embeddings).
    layer_norm_placement: "post" (LN after each residual add) or "pre" (LN before each
      sublayer, plus a final LN).
    hidden_act: "gelu" (the erf form; the only one tupe trains).
    word_term_scale: multiplies q k^T: 1/sqrt(2 d_h) for TUPE, 1/sqrt(d_h) for BERT, RoPE, ALiBi and
      NoPE, 1/sqrt(4 d_h) for BERT-A^d (whose q, k include the projected positions).
    positional_term_scale: multiplies TUPE's position correlation P: 1/sqrt(2 d_h); None for BERT,
      BERT-A^d, RoPE, ALiBi and NoPE (no P).
    position_table_size: rows of the position table of TUPE and BERT-A^d: max_position_embeddings,
      + 1 with untie_cls (TUPE only: row 0 plays p_theta1, row 1 p_theta2, sequence position
      t >= 1 uses row t + 1; without the untie position t uses row t). 0 for BERT-A/R, RoPE, ALiBi,
      NoPE.
    untie_cls: TUPE Eq. 9: the [CLS] row (i = 0) of the positional term is theta_1 = P(row 0, row 0),
      its column (i != 0, j = 0) theta_2 = P(row 1, row 1); with a relative bias the [CLS] row
      uses bucket cls_row_bucket and the column bucket cls_column_bucket. TUPE and the relative bias
      only (refused for bert-absolute-untied, rope, alibi and none).
    relative_buckets, relative_max_distance: the T5 bucket function (bidirectional; see
      modeling_tupe.relative_buckets); relative_bias_rows = relative_buckets + 1 rows of b.
    cls_row_bucket, cls_column_bucket: relative_buckets / 2 and relative_buckets (None without
      the untie or without a relative bias).
    rope_base: rope only: the base b of the rotation frequencies theta_i = b^(-2i/d_h) (RoFormer
      Eq. 15; 10000); d_h must be even. Stated for every variant, read by rope alone.
    classifier_dropout: dropout of the sequence-classification head (None = hidden_dropout_prob).
    ignores_token_type_ids: with type_vocab_size = 0, token_type_ids (which BERT tokenizers return,
      1 for a pair's second sentence) are accepted and ignored, as by RoBERTa's one zero row
      (default: type_vocab_size == 0); False makes them an error there.
    """

    model_type = "tupe"

    def __init__(
        self,
        vocab_size=30522,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=0,
        initializer_range=0.02,
        layer_norm_eps=1e-5,
        position_encoding="tupe-relative",
        layer_norm_placement="post",
        untie_cls=True,
        word_term_scale=None,
        positional_term_scale=None,
        position_table_size=None,
        relative_buckets=32,
        relative_max_distance=128,
        relative_bias_rows=None,
        relative_bucket_function="t5-bidirectional",
        cls_row_bucket=None,
        cls_column_bucket=None,
        rope_base=10000.0,
        classifier_dropout=None,
        ignores_token_type_ids=None,
        pad_token_id=0,
        tie_word_embeddings=True,
        **kwargs,
    ):
        if position_encoding not in VARIANTS:
            raise ValueError(f"TupeConfig: position_encoding '{position_encoding}' is not one of {', '.join(VARIANTS)}")
        if layer_norm_placement not in ("post", "pre"):
            raise ValueError(f"TupeConfig: layer_norm_placement '{layer_norm_placement}' is not post or pre")
        if hidden_act != "gelu":
            raise ValueError(f"TupeConfig: hidden_act '{hidden_act}': only 'gelu' (erf) is supported")
        if hidden_size % num_attention_heads != 0:
            raise ValueError(f"TupeConfig: num_attention_heads {num_attention_heads} must divide hidden_size {hidden_size}")
        if relative_bucket_function != "t5-bidirectional":
            raise ValueError(f"TupeConfig: relative_bucket_function '{relative_bucket_function}' is not t5-bidirectional")
        untied = position_encoding.startswith("tupe-")
        relative = position_encoding.endswith("-relative")
        bert_ad = position_encoding == "bert-absolute-untied"
        if (bert_ad or position_encoding in COMPUTED) and untie_cls:
            raise ValueError(f"TupeConfig: untie_cls resets a learned positional logit term; position_encoding "
                             f"{position_encoding} has none")
        head = hidden_size // num_attention_heads
        if position_encoding == "rope" and head % 2 != 0:
            raise ValueError(f"TupeConfig: rope rotates pairs of features, so d_h = hidden_size / num_attention_heads "
                             f"must be even, got {head}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.position_encoding = position_encoding
        self.layer_norm_placement = layer_norm_placement
        self.untie_cls = bool(untie_cls)
        # The defaults below are the paper's; an exported config.json states each explicitly.
        self.word_term_scale = word_term_scale if word_term_scale is not None else (
            (4.0 * head) ** -0.5 if bert_ad else (2.0 * head) ** -0.5 if untied else head ** -0.5)
        self.positional_term_scale = positional_term_scale if positional_term_scale is not None else (
            (2.0 * head) ** -0.5 if untied else None)
        self.position_table_size = position_table_size if position_table_size is not None else (
            max_position_embeddings + (1 if self.untie_cls and untied else 0) if untied or bert_ad else 0)
        self.relative_buckets = relative_buckets
        self.relative_max_distance = relative_max_distance
        self.relative_bias_rows = relative_bias_rows if relative_bias_rows is not None else (
            relative_buckets + 1 if relative else 0)
        self.relative_bucket_function = relative_bucket_function
        with_cls_buckets = self.untie_cls and relative
        self.cls_row_bucket = cls_row_bucket if cls_row_bucket is not None else (
            relative_buckets // 2 if with_cls_buckets else None)
        self.cls_column_bucket = cls_column_bucket if cls_column_bucket is not None else (
            relative_buckets if with_cls_buckets else None)
        self.rope_base = float(rope_base)
        self.classifier_dropout = classifier_dropout
        self.ignores_token_type_ids = bool(type_vocab_size == 0 if ignores_token_type_ids is None else ignores_token_type_ids)
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)

    @property
    def has_untied_positions(self):
        """TUPE's untied term P in the logits (TUPE-A, TUPE-R)."""
        return self.position_encoding.startswith("tupe-")

    @property
    def has_position_projections(self):
        """The position table with its LN and U^Q, U^K (TUPE-A, TUPE-R, BERT-A^d)."""
        return self.has_untied_positions or self.has_positional_query_key

    @property
    def has_positional_query_key(self):
        """BERT-A^d: LN(p) U^Q + b^Q and LN(p) U^K + b^K added to every layer's query and key."""
        return self.position_encoding == "bert-absolute-untied"

    @property
    def has_relative_bias(self):
        """The T5 relative bias B in the logits (TUPE-R, BERT-R)."""
        return self.position_encoding.endswith("-relative")

    @property
    def has_rotary(self):
        """RoPE: every layer's q and k turned by position (modeling_tupe.rotary)."""
        return self.position_encoding == "rope"

    @property
    def has_alibi(self):
        """ALiBi's constant bias -m_h |i - j| in the logits (no parameters)."""
        return self.position_encoding == "alibi"

    @property
    def has_computed_positions(self):
        """RoPE, ALiBi, NoPE: no position table, so no length limit (max_position_embeddings is the trained length)."""
        return self.position_encoding in COMPUTED

    @property
    def has_absolute_input_positions(self):
        """BERT's position embedding added to the input (BERT-A, BERT-R; not BERT-A^d)."""
        return self.position_encoding in ("bert-absolute", "bert-relative")
