// Precompiled header for libraries that use LibTorch: the narrow headers (not
// torch/torch.h, which pulls in every module and optimizer).
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/types.h>
