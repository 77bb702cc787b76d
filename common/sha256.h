// SHA-256 (FIPS 180-4) of bytes and files, through OpenSSL's EVP interface. The hex digest of
// a vocabulary file is the identity of a token-id space (docs/formats.md: shards and checkpoints
// record it; a mismatch is refused); checkpoint manifests record one per file so that a
// damaged file is found before it is trained on (trainer/checkpoint_store.h).
#pragma once
#include <string>
#include <string_view>

namespace tupe {

/// Lower-case hex SHA-256 (64 characters) of `bytes`. Throws tupe::Error if OpenSSL fails.
std::string sha256_hex(std::string_view bytes);

/// Lower-case hex SHA-256 of the file's bytes, read in 1 MiB chunks.
/// Throws tupe::Error "<path>: cannot open: <reason>" / "<path>: cannot read: <reason>".
std::string file_sha256_hex(const std::string& path);

}  // namespace tupe
