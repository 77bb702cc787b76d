// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and final xor
// 0xFFFFFFFF; RFC 3720 appendix B.4), the checksum of each sample of a shard (data_pipeline/shard_format.h)
// and of TensorBoard's record frames (metrics/event_file.h).
// The same function as Python's `crc32c.crc32c` (PyPI / Debian python3-crc32c) and
// Intel's SSE4.2 CRC32 instruction. On x86-64 CPUs with SSE4.2 it runs on that instruction
// (about 8 bytes a cycle); elsewhere on a table-driven software loop (slicing by 8).
#pragma once
#include <cstddef>
#include <cstdint>

namespace tupe {

/// CRC-32C of bytes [data, data + n) continuing `crc` (the CRC of the bytes before them;
/// 0 to start): crc32c(crc32c(0, a), b) == crc32c(0, a followed by b).
uint32_t crc32c(uint32_t crc, const void* data, size_t n);

/// The same computed by the software loop only (tests compare it with the instruction).
uint32_t crc32c_software(uint32_t crc, const void* data, size_t n);

/// Whether crc32c() uses the SSE4.2 instruction on this CPU.
bool crc32c_uses_hardware();

}  // namespace tupe
