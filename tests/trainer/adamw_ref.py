"""Reference side of the AdamW test (tests/trainer/test_optimizers.cpp): runs
torch.optim.AdamW twice on the inputs the C++ test wrote, as the fused implementation
(fused=True, at::_fused_adamw_ on CPU) and as the single-tensor one (foreach=False).

  adamw_ref.py IN OUT
IN (safetensors): "param/<name>" initial parameters; "grad/<k>/<name>" the gradient of step
k (absent: the parameter has no grad in that step, as grad = None); "lr" [steps] float64.
Metadata: "names" (comma-separated, in order), "decay" (1/0 per name), "beta1", "beta2",
"eps", "weight_decay", "steps".
OUT (safetensors), for IMPL in "fused", "single": "IMPL/param/<k>/<name>" after each step
k; "IMPL/exp_avg/<name>", "IMPL/exp_avg_sq/<name>" and "IMPL/step/<name>" (int64) of the
final optimizer state.
"""
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def run(tensors, meta, impl, out):
    names = meta["names"].split(",")
    decay = [flag == "1" for flag in meta["decay"].split(",")]
    steps = int(meta["steps"])
    wd = float(meta["weight_decay"])
    params = {n: tensors["param/" + n].clone().requires_grad_(True) for n in names}
    groups = [
        {"params": [params[n] for n, d in zip(names, decay) if d], "weight_decay": wd},
        {"params": [params[n] for n, d in zip(names, decay) if not d], "weight_decay": 0.0},
    ]
    kwargs = {"fused": True} if impl == "fused" else {"foreach": False}
    opt = torch.optim.AdamW(groups, lr=1.0, betas=(float(meta["beta1"]), float(meta["beta2"])),
                            eps=float(meta["eps"]), weight_decay=wd, **kwargs)
    lrs = tensors["lr"].tolist()
    for k in range(steps):
        for g in opt.param_groups:
            g["lr"] = lrs[k]
        for n in names:
            key = f"grad/{k}/{n}"
            params[n].grad = tensors[key].clone() if key in tensors else None
        opt.step()
        for n in names:
            out[f"{impl}/param/{k}/{n}"] = params[n].detach().clone()
    for n in names:
        state = opt.state[params[n]]
        out[f"{impl}/exp_avg/{n}"] = state["exp_avg"].clone()
        out[f"{impl}/exp_avg_sq/{n}"] = state["exp_avg_sq"].clone()
        out[f"{impl}/step/{n}"] = torch.tensor(int(state["step"].item()), dtype=torch.int64)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with safe_open(src, framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    out = {}
    for impl in ("fused", "single"):
        run(tensors, meta, impl, out)
    save_file(out, dst)
    print("OK", meta["steps"], "steps,", len(meta["names"].split(",")), "parameters, fused and single-tensor")


if __name__ == "__main__":
    main()
