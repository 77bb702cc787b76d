"""Reference side of the AdamW test (tests/trainer/test_optimizers.cpp): runs
torch.optim.AdamW (single-tensor path, foreach=False) on the inputs the C++ test wrote.

  adamw_ref.py IN OUT
IN (safetensors): "param/<name>" initial parameters; "grad/<k>/<name>" the gradient of step
k (absent: the parameter has no grad in that step, as grad = None); "lr" [steps] float64.
Metadata: "names" (comma-separated, in order), "decay" (1/0 per name), "beta1", "beta2",
"eps", "weight_decay", "steps".
OUT (safetensors): "param/<k>/<name>" after each step k; "exp_avg/<name>",
"exp_avg_sq/<name>" and "step/<name>" (int64) of the final optimizer state.
"""
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with safe_open(src, framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    names = meta["names"].split(",")
    decay = [flag == "1" for flag in meta["decay"].split(",")]
    steps = int(meta["steps"])
    wd = float(meta["weight_decay"])
    params = {n: tensors["param/" + n].clone().requires_grad_(True) for n in names}
    groups = [
        {"params": [params[n] for n, d in zip(names, decay) if d], "weight_decay": wd},
        {"params": [params[n] for n, d in zip(names, decay) if not d], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=1.0, betas=(float(meta["beta1"]), float(meta["beta2"])),
                            eps=float(meta["eps"]), weight_decay=wd, foreach=False)
    lrs = tensors["lr"].tolist()
    out = {}
    for k in range(steps):
        for g in opt.param_groups:
            g["lr"] = lrs[k]
        for n in names:
            key = f"grad/{k}/{n}"
            params[n].grad = tensors[key].clone() if key in tensors else None
        opt.step()
        for n in names:
            out[f"param/{k}/{n}"] = params[n].detach().clone()
    for n in names:
        state = opt.state[params[n]]
        out["exp_avg/" + n] = state["exp_avg"].clone()
        out["exp_avg_sq/" + n] = state["exp_avg_sq"].clone()
        out["step/" + n] = torch.tensor(int(state["step"].item()), dtype=torch.int64)
    save_file(out, dst)
    print("OK", steps, "steps,", len(names), "parameters")


if __name__ == "__main__":
    main()
