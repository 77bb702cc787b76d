"""HF's standard calls on an exported folder (hf_checks.py pretrained): model(**tokenizer(...)) with
single sentences and pairs, AutoModel, the feature-extraction pipeline, resize_token_embeddings
+ save + reload; against tupe's own forward (tools_fixture forward) on the tokenizer's ids.
"""
import json
import os
import shutil

import torch
from safetensors.torch import load_file

from hf_common import FIXTURE, TOL, WIKI, check, maxdiff, run


def wiki_sentences(n):
    """The first n WikiText-2 (test) lines of 8 to 40 words, headings skipped, spaces collapsed."""
    out = []
    with open(WIKI, encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if 8 <= len(words) <= 40 and not line.strip().startswith("="):
                out.append(" ".join(words))
                if len(out) == n:
                    return out
    return out


def real_positions_diff(got, ref, mask):
    """max |got - ref| over the real (unpadded) positions; got (B, L, *) and ref (B, L_ref >= L, *)."""
    L = got.shape[1]
    real = mask.bool()
    return maxdiff(got[real], ref[:, :L][real])


def standard_calls(out, ckpt, work, name, remote):
    """HF's standard calls on real text against tupe's own forward on the tokenizer's ids:
    model(**tokenizer(sentences)), model(**tokenizer(a, b)) with the token_type_ids a BERT
    tokenizer gives (1 for the second sentence; ignored by a model without segment embedding),
    the feature-extraction pipeline and AutoModel. Returns the max |diff| of each (1e-5)."""
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer, pipeline
    kw = {"trust_remote_code": True} if remote else {"attn_implementation": "eager"}
    tok = AutoTokenizer.from_pretrained(out, trust_remote_code=remote)
    model = AutoModelForMaskedLM.from_pretrained(out, **kw).eval()
    cfg = json.load(open(os.path.join(out, "config.json")))
    tok_cfg = json.load(open(os.path.join(out, "tokenizer_config.json")))
    sents = wiki_sentences(12)
    single = tok(sents[:4], padding=True, return_tensors="pt")
    pair = tok(sents[4:8], sents[8:12], padding=True, truncation=True, max_length=128, return_tensors="pt",
               return_token_type_ids=True)
    check((pair["token_type_ids"] == 1).any().item(), f"{name}: the pairs' token_type_ids mark the second sentence")
    if remote:
        check(cfg["ignores_token_type_ids"] is True and cfg["type_vocab_size"] == 0,
              "config.json: type_vocab_size 0, ignores_token_type_ids true")
    else:
        check(cfg["type_vocab_size"] == 2, "BertForMaskedLM export: two (zero) token-type rows, for either sentence of a pair")
    check(tok_cfg["model_input_names"] == ["input_ids", "attention_mask"] and "token_type_ids" not in single
          and "token_type_ids" not in tok(sents[4], sents[8]),
          "tokenizer_config.json: model_input_names = input_ids, attention_mask (no token_type_ids returned)")
    # tupe's forward on the same ids (one batch: the single sentences, then the pairs).
    L = max(single["input_ids"].shape[1], pair["input_ids"].shape[1])
    pad = lambda t: torch.nn.functional.pad(t, (0, L - t.shape[1]))  # [PAD] = 0, mask 0
    ids_path, ref_path = os.path.join(work, f"calls_{name}_in.safetensors"), os.path.join(work, f"calls_{name}.safetensors")
    save_file({"input_ids": torch.cat([pad(single["input_ids"]), pad(pair["input_ids"])]).contiguous(),
               "attention_mask": torch.cat([pad(single["attention_mask"]), pad(pair["attention_mask"])]).contiguous()},
              ids_path)
    run(FIXTURE, "forward", ckpt, ref_path, ids_path)
    ref = load_file(ref_path)
    V = cfg["vocab_size"]
    with torch.no_grad():
        d_single = real_positions_diff(model(**single).logits, ref["mlm_logits"].view(8, L, V)[:4], single["attention_mask"])
        d_pair = real_positions_diff(model(**pair).logits, ref["mlm_logits"].view(8, L, V)[4:], pair["attention_mask"])
        base = AutoModel.from_pretrained(out, **kw).eval()
        d_base = real_positions_diff(base(**pair).last_hidden_state, ref["last_hidden"][4:], pair["attention_mask"])
    check(d_single <= TOL, f"{name}: model(**tokenizer(4 sentences)) MLM logits vs tupe's, max |diff| {d_single:.2e} <= {TOL}")
    check(d_pair <= TOL, f"{name}: model(**tokenizer(4 pairs)) with token_type_ids, max |diff| {d_pair:.2e} <= {TOL}")
    check(d_base <= TOL, f"{name}: AutoModel(**tokenizer(pairs)).last_hidden_state vs tupe's, max |diff| {d_base:.2e}")
    features = pipeline("feature-extraction", model=out, tokenizer=out, device="cpu", trust_remote_code=remote,
                        model_kwargs={} if remote else {"attn_implementation": "eager"})
    d_feat = 0.0
    for i, sent in enumerate(sents[:4]):
        f = torch.tensor(features(sent))[0]  # (n, d)
        n = int(single["attention_mask"][i].sum())
        check(f.shape[0] == n, f"{name}: feature-extraction gives {n} vectors for sentence {i}")
        d_feat = max(d_feat, maxdiff(f, ref["last_hidden"][i, :n]))
    check(d_feat <= TOL, f"{name}: feature-extraction pipeline vs tupe's last hidden state, max |diff| {d_feat:.2e}")
    return d_single, d_pair, d_feat


def resize_and_reload(out, work, name, remote):
    """tokenizer.add_tokens + resize_token_embeddings (with and without pad_to_multiple_of=8):
    embedding, decoder, MLM bias and config agree on the new size; the old tokens' logits
    are unchanged; the new tokens run; save_pretrained + from_pretrained give the same logits."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    kw = {"trust_remote_code": True} if remote else {}
    sents = wiki_sentences(4)
    before = AutoModelForMaskedLM.from_pretrained(out, **kw).eval()
    V = before.config.vocab_size
    for multiple in (None, 8):
        tok = AutoTokenizer.from_pretrained(out, **kw)
        check(tok.add_tokens(["tupeword1", "tupeword2", "tupeword3"]) == 3, "3 tokens added")
        model = AutoModelForMaskedLM.from_pretrained(out, **kw).eval()
        model.resize_token_embeddings(len(tok), pad_to_multiple_of=multiple)
        want = len(tok) if multiple is None else -(-len(tok) // multiple) * multiple
        head = model.get_output_embeddings()
        sizes = (model.get_input_embeddings().weight.shape[0], head.weight.shape[0], head.bias.shape[0],
                 model.config.vocab_size)
        check(sizes == (want,) * 4, f"{name}: resize to {len(tok)} (pad_to_multiple_of={multiple}): embedding, decoder, "
                                    f"MLM bias, config.vocab_size = {sizes}, want {want}")
        old = tok(sents, padding=True, return_tensors="pt")
        new = tok([s + " tupeword2 tupeword1" for s in sents], padding=True, return_tensors="pt")
        with torch.no_grad():
            d_old = maxdiff(model(**old).logits[..., :V], before(**old).logits)
            logits = model(**new).logits
        check(d_old <= 1e-6, f"{name}: the old vocabulary's logits unchanged by the resize ({d_old:.1e})")
        check(logits.shape[-1] == want and torch.isfinite(logits).all().item() and (new["input_ids"] >= V).any().item(),
              f"{name}: forward on text with the new tokens: logits {tuple(logits.shape)}, finite")
        saved = os.path.join(work, f"resized_{name}_{multiple}")
        shutil.rmtree(saved, ignore_errors=True)
        model.save_pretrained(saved)
        tok.save_pretrained(saved)
        again = AutoModelForMaskedLM.from_pretrained(saved, **kw).eval()
        tok2 = AutoTokenizer.from_pretrained(saved, **kw)
        with torch.no_grad():
            d = maxdiff(again(**tok2([s + " tupeword2 tupeword1" for s in sents], padding=True, return_tensors="pt")).logits,
                        logits)
        check(again.get_output_embeddings().bias.shape[0] == want and d == 0.0,
              f"{name}: save_pretrained + from_pretrained after the resize: same logits (max |diff| {d:.1e})")
