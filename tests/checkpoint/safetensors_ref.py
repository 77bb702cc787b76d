"""Reference side of the safetensors tests (tests/trainer/test_safetensors.cpp).

  safetensors_ref.py write PATH   write the reference tensors with Python's safetensors
  safetensors_ref.py check PATH   read a file written by tupe with Python's safetensors and
                                  check every tensor, dtype, shape and the metadata
The tensors are closed-form functions of the element index i in [0, 24) (shape [2, 3, 4]);
the C++ test computes the same values element by element.
"""
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file

METADATA = {"format": "pt", "note": "written by safetensors_ref.py \u00fc"}


def reference_tensors():
    i = torch.arange(24, dtype=torch.int64).reshape(2, 3, 4)
    c = i - 12  # centred index in [-12, 12)
    return {
        "t_f64": c.to(torch.float64) * 0.1,
        "t_f32": c.to(torch.float32) * 0.375,
        "t_f16": (c.to(torch.float32) * 0.375).to(torch.float16),
        "t_bf16": (c.to(torch.float32) * 0.375).to(torch.bfloat16),
        "t_i64": c * 1000000007,
        "t_i32": (c * 1000 + 7).to(torch.int32),
        "t_i16": (c * 100 + 7).to(torch.int16),
        "t_i8": (c * 5).to(torch.int8),
        "t_u8": (i * 10).to(torch.uint8),
        "t_bool": (i % 3) == 0,
        "scalar_f32": torch.tensor(3.25, dtype=torch.float32),
        "empty_f32": torch.zeros(0, 5, dtype=torch.float32),
    }


def check(path):
    expected = reference_tensors()
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        if meta != METADATA:
            sys.exit(f"metadata {meta!r} != {METADATA!r}")
        names = set(f.keys())
        if names != set(expected):
            sys.exit(f"names {sorted(names)} != {sorted(expected)}")
        for name, want in expected.items():
            got = f.get_tensor(name)
            if got.dtype != want.dtype or got.shape != want.shape:
                sys.exit(f"{name}: {got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}")
            if not torch.equal(got, want):
                sys.exit(f"{name}: values differ: {got.flatten()[:8]} vs {want.flatten()[:8]}")
    print("OK", len(expected), "tensors")


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "write":
        save_file(reference_tensors(), path, metadata=METADATA)
    elif mode == "check":
        check(path)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
