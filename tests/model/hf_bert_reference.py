"""Reference for the BERT-A parity test: a HuggingFace `transformers` BertModel with
random weights (fresh seed each run, printed), a padded random batch with segment ids,
and its last hidden states, saved as safetensors with the tensor names of tupe's Encoder
(model/tupe_bert.h) so the C++ test can load them strictly.

Usage: hf_bert_reference.py OUT.safetensors
Fails (non-zero exit) when transformers or torch is missing: the test must not skip.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import BertConfig, BertModel


def hf_to_tupe(name: str) -> str | None:
    """Maps a BertModel parameter name to tupe's Encoder name (None: not in tupe's encoder)."""
    if name.startswith("pooler."):
        return None
    emb = {
        "embeddings.word_embeddings.weight": "embeddings.word.weight",
        "embeddings.position_embeddings.weight": "embeddings.position.weight",
        "embeddings.token_type_embeddings.weight": "embeddings.segment.weight",
        "embeddings.LayerNorm.weight": "embeddings.norm.weight",
        "embeddings.LayerNorm.bias": "embeddings.norm.bias",
    }
    if name in emb:
        return emb[name]
    parts = name.split(".")  # encoder.layer.<i>.<rest>
    assert parts[0] == "encoder" and parts[1] == "layer", name
    i, rest = parts[2], ".".join(parts[3:])
    table = {
        "attention.self.query": "attention.query",
        "attention.self.key": "attention.key",
        "attention.self.value": "attention.value",
        "attention.output.dense": "attention.output",
        "attention.output.LayerNorm": "attention_norm",
        "intermediate.dense": "ffn_in",
        "output.dense": "ffn_out",
        "output.LayerNorm": "ffn_norm",
    }
    module, leaf = rest.rsplit(".", 1)
    return f"layers.{i}.{table[module]}.{leaf}"


def main() -> None:
    out = sys.argv[1]
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"hf_bert_reference: seed {seed}, transformers BertModel")
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=211, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                     intermediate_size=160, max_position_embeddings=40, type_vocab_size=2,
                     hidden_act="gelu", layer_norm_eps=1e-12, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, attn_implementation="eager")
    model = BertModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():  # non-trivial LayerNorm and bias values, not just the init
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    B, L = 3, 29
    ids = torch.randint(0, cfg.vocab_size, (B, L))
    mask = torch.ones(B, L, dtype=torch.long)
    mask[1, 20:] = 0
    mask[2, 9:] = 0
    seg = torch.zeros(B, L, dtype=torch.long)
    seg[:, 12:] = 1
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask, token_type_ids=seg).last_hidden_state
    tensors = {}
    for name, p in model.named_parameters():
        mapped = hf_to_tupe(name)
        if mapped is not None:
            tensors[mapped] = p.detach().contiguous()
    tensors["input.input_ids"] = ids
    tensors["input.attention_mask"] = mask
    tensors["input.segment_ids"] = seg
    tensors["expected.hidden"] = hidden.contiguous()
    meta = {"config": json.dumps({
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size, "num_layers": cfg.num_hidden_layers,
        "num_heads": cfg.num_attention_heads, "ffn_size": cfg.intermediate_size,
        "max_positions": cfg.max_position_embeddings, "type_vocab_size": cfg.type_vocab_size,
        "layer_norm_eps": cfg.layer_norm_eps})}
    save_file(tensors, out, metadata=meta)


if __name__ == "__main__":
    main()
