#include "common/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "common/error.h"

namespace tupe {

namespace {

/// One digest in progress; owns the EVP context.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    TUPE_CHECK(ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1,
               "sha256: OpenSSL EVP_DigestInit_ex failed");
  }
  void update(const void* data, size_t size_bytes) {
    TUPE_CHECK(EVP_DigestUpdate(ctx_.get(), data, size_bytes) == 1, "sha256: OpenSSL EVP_DigestUpdate failed");
  }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    TUPE_CHECK(EVP_DigestFinal_ex(ctx_.get(), digest, &size) == 1, "sha256: OpenSSL EVP_DigestFinal_ex failed");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * size);
    for (unsigned int i = 0; i < size; ++i) {
      out.push_back(kHex[digest[i] >> 4]);
      out.push_back(kHex[digest[i] & 15]);
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.hex();
}

std::string file_sha256_hex(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  TUPE_CHECK(f != nullptr, path << ": cannot open: " << std::strerror(errno));
  Sha256 h;
  std::vector<char> buf(size_t{1} << 20);
  while (true) {
    const size_t got = std::fread(buf.data(), 1, buf.size(), f.get());
    TUPE_CHECK(!std::ferror(f.get()), path << ": cannot read: " << std::strerror(errno));
    h.update(buf.data(), got);
    if (got < buf.size()) break;
  }
  return h.hex();
}

}  // namespace tupe
