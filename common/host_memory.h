// Host (CPU) memory policy of the tupe process.
//
// LibTorch's CPU allocator is plain malloc/free. With glibc's defaults every block above the
// dynamic mmap threshold (at most 32 MiB; e.g. the (M, V) MLM logits, the (B, H, L, L)
// attention probabilities) is mmap-ed on allocation and unmapped on free, and the top of
// the heap is trimmed back to the kernel, so each training step page-faults all of its
// large activations in again (measured: 14% of a CPU step spent in the kernel, bench/
// RESULTS.md). A training step allocates the same sizes every time, so keeping freed
// memory in the process is what a caching allocator does; it costs a resident set equal to
// the peak of one step.
#pragma once

namespace tupe {

/// Makes glibc serve every allocation from its heaps (no per-block mmap) and never trim
/// freed memory back to the kernel (mallopt M_MMAP_MAX = 0, M_TRIM_THRESHOLD = max).
/// Leaves malloc untouched and returns false when the user chose a policy: environment
/// TUPE_HOST_MALLOC=default, or GLIBC_TUNABLES naming a glibc.malloc tunable. Returns true
/// when applied. Call once, first thing in main (before threads start). No-op (false) on a
/// C library other than glibc.
bool keep_freed_host_memory();

}  // namespace tupe
