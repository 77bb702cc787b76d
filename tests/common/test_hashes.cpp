// SHA-256 (common/sha256.h) against the FIPS 180-4 example vectors (NIST CSRC "Examples with
// intermediate values") and digests from Python's hashlib; FNV-1a 64 (common/fnv1a.h)
// against the FNV reference test vectors (Noll, test_fnv.c / draft-eastlake-fnv).
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "common/fnv1a.h"
#include "common/sha256.h"
#include "tests/common/common_test_util.h"

namespace tupe {
namespace {

TEST(CommonSha256, Fips180Vectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                 "mnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Bytes that are not text (NUL, high bit): hashlib.sha256(b"\x00\xff\x80tupe\n").
  EXPECT_EQ(sha256_hex(std::string("\x00\xff\x80tupe\n", 8)),
            "9311b6b2dd30a6b2db8537e8722caaa0d7dc45a233480fcdde9e9a816c66a579");
}

/// Byte i of the test files: ((i * 2654435761) >> 13) mod 256.
std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u) >> 13);
  return s;
}

TEST(CommonSha256, FilesAroundBlockAndChunkEdgesMatchHashlib) {
  // hashlib.sha256(bytes(((i * 2654435761) >> 13) & 0xff for i in range(n))).hexdigest():
  // one byte; 55/56 and 63/64 (the padding edges of a 64-byte block); one 1 MiB read chunk
  // of file_sha256_hex minus one, exactly, plus one; and several chunks.
  const std::pair<size_t, const char*> cases[] = {
      {1, "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"},
      {55, "8d96a9ee32f7a2df89c4504435add6a5a0d8e9a4de80097c7a4bcc330ac31def"},
      {56, "df82d23a25b1e180b4d9eb27def14d8ada198011b1bfc08f2d4a62e544daed79"},
      {63, "d54ef68e60852bbbef6cc25985de164140cb7bd52e739508a2321cc7b18aba3c"},
      {64, "fc134a3ea0e6c07d4df416a6751701becfd8675a944dd57ed6a5bfbed3b38a3e"},
      {(1u << 20) - 1, "ed8217a74550518aee3b0294496537c2b6a649bf4be6920be9ad32a8cd90c41b"},
      {1u << 20, "f5600770a8695a85fc7bb6d18a40a5b80a2b8a39c86f346a1b58f8ccc1e8fde6"},
      {(1u << 20) + 1, "32433ee969c82c7d8ed4c05abf7f5ea7227ceef92175df89b10a58d0e86bf954"},
      {3u * (1u << 20) + 12345, "1a0890dc1decb3e8024d4938352598736fb0fb1a758b00e88683e2b090ad1c4e"},
  };
  common_test::ScratchDir dir("sha256");
  for (const auto& [n, want] : cases) {
    const std::string bytes = pattern(n);
    EXPECT_EQ(sha256_hex(bytes), want) << n << " bytes";
    EXPECT_EQ(file_sha256_hex(dir.write("f" + std::to_string(n), bytes)), want) << n << " bytes (file)";
  }
  EXPECT_EQ(file_sha256_hex(dir.write("empty", "")), sha256_hex(""));
}

TEST(CommonSha256, UnreadableFilesNameThePath) {
  common_test::ScratchDir dir("sha256-errors");
  try {
    file_sha256_hex(dir.file("absent"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(dir.file("absent") + ": cannot open", 0), 0u) << e.what();
  }
  // A folder opens but cannot be read.
  EXPECT_THROW(file_sha256_hex(dir.path().string()), Error);
}

TEST(CommonFnv1a, ReferenceVectors) {
  EXPECT_EQ(fnv1a_64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a_64(""), kFnv1a64Basis);
  EXPECT_EQ(fnv1a_64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a_64("foobar"), 0x85944171f73967e8ull);
}

TEST(CommonFnv1a, PiecesContinueTheHash) {
  const std::string text = "the quick brown fox jumps over the lazy dog";
  for (size_t cut = 0; cut <= text.size(); ++cut)
    EXPECT_EQ(fnv1a_64(text.substr(cut), fnv1a_64(text.substr(0, cut))), fnv1a_64(text)) << cut;
  EXPECT_EQ(fnv1a_64("bar", fnv1a_64("foo")), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace tupe
