// The one translation unit of tupe_torch_pch_owner: CMake needs a source to build the shared
// LibTorch precompiled header from (CMakeLists.txt, "LibTorch as one interface target").
