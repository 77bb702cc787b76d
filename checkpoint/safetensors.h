// safetensors files (docs/formats.md "Checkpoints"; the format of Hugging Face's `safetensors`):
//   [8 bytes: N, little-endian uint64 header length]
//   [N bytes: UTF-8 JSON object, padded with spaces to a multiple of 8:
//      name -> {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//      optional "__metadata__" -> {string: string}]
//   [data: raw little-endian tensor bytes; offsets are relative to the data start, the
//      tensors tile the data block exactly, in offset order, without gaps or overlap]
// dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "checkpoint/named_tensors.h"

namespace tupe::checkpoint {

/// String -> string metadata of a safetensors file (its "__metadata__").
using TensorMetadata = std::map<std::string, std::string>;

/// Contents of a safetensors file: the tensors in file (offset) order, on the CPU,
/// contiguous, with the stored dtype and shape; and the metadata.
struct SafetensorsContents {
  NamedTensors tensors;
  TensorMetadata metadata;
};

/// The safetensors name of a dtype ("F32" for at::kFloat); throws tupe::Error for a dtype
/// the format does not carry here (complex, quantized, ...).
std::string safetensors_dtype_name(at::ScalarType dtype);

/// Reads and validates a whole file: header length vs file size, JSON syntax, every entry
/// (dtype known, shape non-negative integers, shape * itemsize == end - begin), offsets
/// contiguous from 0 to the end of the file, BOOL bytes 0/1, metadata strings only.
/// Throws ONE-line tupe::Error "<path>: tensor '<name>': <cause>" (or "<path>: header ...").
SafetensorsContents read_safetensors(const std::filesystem::path& path);

/// Writes `tensors` (any device/layout; copied to contiguous CPU little-endian bytes) and
/// `metadata` atomically (temp file, fsync, rename, fsync of the folder). Tensors are laid
/// out by item size (largest first) then name, as Python's safetensors does, so every
/// tensor is aligned to its item size. Throws tupe::Error for an empty, duplicate or
/// reserved ("__metadata__") name, or an unsupported dtype, naming the file and tensor.
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const TensorMetadata& metadata = {});

}  // namespace tupe::checkpoint
