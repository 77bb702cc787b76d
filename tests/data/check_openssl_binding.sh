#!/usr/bin/env bash
# libparquet (pyarrow wheel) exports the OpenSSL it bundles under OpenSSL's own names, the
# names of Debian's libcrypto.so.3 that common/sha256.cpp calls (cmake/TupeArrow.cmake). This
# runs `tupe preprocess` with the dynamic linker's binding log and fails when any object other
# than Arrow's own binds an OpenSSL name (any C name) to libparquet, when tupe's SHA-256 calls
# do not bind to libcrypto.so.3, or when the vocabulary's SHA-256 recorded in the shard differs
# from Python's hashlib.
# Usage: check_openssl_binding.sh TUPE SHARED_DATA   (TUPE_PYTHON: a Python with h5py)
set -euo pipefail
tupe="$1"
data="$2"
py="${TUPE_PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
vocab="$data/vocab/bert-base-uncased-vocab.txt"
if ! LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld" "$tupe" preprocess --quiet \
    --input "$data/text/bert-sample-text.txt" --output "$work/shards" --tokenizer.vocab "$vocab" \
    --preprocess.validation_ratio 0 > "$work/log" 2>&1; then
  cat "$work/log"
  echo "FAIL: tupe preprocess failed"
  exit 1
fi
# Only the process itself (its pid's file holds the libraries tupe loads).
log="$(grep -l 'libparquet' "$work"/ld.* | head -n 1 || true)"
[ -n "$log" ] || { echo "FAIL: libparquet was not loaded (no binding names it); is tupe built with TUPE_WITH_ARROW?"; exit 1; }
# "binding file A [0] to B [0]: normal symbol `NAME' [VERSION]"
bad="$(grep -E "binding file .* to [^ ]*libparquet\.so[^ ]* .*symbol \`[^_][^']*'" "$log" |
       grep -v -E "binding file [^ ]*lib(parquet|arrow)\.so" | head -n 5 || true)"
if [ -n "$bad" ]; then
  echo "FAIL: C names bound to libparquet's copies:"
  echo "$bad"
  exit 1
fi
grep -q -E "binding file [^ ]*tupe \[0\] to [^ ]*libcrypto\.so\.3 \[0\]: normal symbol \`EVP_DigestInit_ex'" "$log" || {
  echo "FAIL: tupe's EVP_DigestInit_ex does not bind to libcrypto.so.3:"
  grep "EVP_DigestInit_ex" "$log" | head -n 3
  exit 1
}
parquet_to_crypto="$(grep -c -E "binding file [^ ]*libparquet\.so[^ ]* .* to [^ ]*libcrypto\.so\.3" "$log" || true)"
"$py" - "$work/shards/train-00000-of-00001.h5" "$vocab" <<'EOF'
import hashlib, sys
import h5py
recorded = h5py.File(sys.argv[1], "r").attrs["vocab_sha256"]
recorded = recorded.decode() if isinstance(recorded, bytes) else str(recorded)
expected = hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest()
if recorded != expected:
    sys.exit(f"FAIL: the shard records vocab_sha256 {recorded}, hashlib says {expected}")
print(f"vocab_sha256 {recorded} = hashlib's")
EOF
echo "ok: no C name binds to libparquet; tupe's OpenSSL calls bind to libcrypto.so.3 (and $parquet_to_crypto of" \
     "libparquet's own OpenSSL references too, unused: tupe reads no encrypted Parquet)"
