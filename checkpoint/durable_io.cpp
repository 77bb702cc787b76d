#include "checkpoint/durable_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace tupe::checkpoint {

namespace {
std::string cause() { return std::strerror(errno); }
}  // namespace

DurableFile::DurableFile(std::filesystem::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TUPE_CHECK(fd_ >= 0, path_.string() << ": cannot create: " << cause());
}

DurableFile::~DurableFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

void DurableFile::write(const void* data, size_t size_bytes) {
  TUPE_CHECK(fd_ >= 0, path_.string() << ": write after commit");
  const char* p = static_cast<const char*>(data);
  while (size_bytes > 0) {
    // Linux writes at most ~2 GiB per call; loop on short writes and EINTR.
    const size_t chunk_bytes = std::min<size_t>(size_bytes, size_t{1} << 30);
    const ssize_t n = ::write(fd_, p, chunk_bytes);
    if (n < 0 && errno == EINTR) continue;
    TUPE_CHECK(n > 0, path_.string() << ": write failed at byte offset " << written_bytes_ << ": "
                                     << (n < 0 ? cause() : std::string("wrote nothing")));
    p += n;
    size_bytes -= static_cast<size_t>(n);
    written_bytes_ += static_cast<uint64_t>(n);
  }
}

void DurableFile::commit() {
  TUPE_CHECK(fd_ >= 0, path_.string() << ": committed twice");
  const int sync_rc = ::fsync(fd_);
  const std::string sync_cause = sync_rc != 0 ? cause() : "";
  const int close_rc = ::close(fd_);
  const std::string close_cause = close_rc != 0 ? cause() : "";
  fd_ = -1;
  if (sync_rc != 0 || close_rc != 0) {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
    TUPE_FAIL(path_.string() << ": " << (sync_rc != 0 ? "fsync failed: " + sync_cause : "close failed: " + close_cause));
  }
}

void fsync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  TUPE_CHECK(fd >= 0, dir.string() << ": cannot open folder for fsync: " << cause());
  const int rc = ::fsync(fd);
  const std::string why = rc != 0 ? cause() : "";
  ::close(fd);
  TUPE_CHECK(rc == 0, dir.string() << ": fsync of folder failed: " << why);
}

void durable_rename(const std::filesystem::path& from, const std::filesystem::path& to) {
  TUPE_CHECK(std::rename(from.c_str(), to.c_str()) == 0,
             to.string() << ": cannot rename " << from.string() << " to it: " << cause());
  fsync_directory(to.has_parent_path() ? to.parent_path() : std::filesystem::path("."));
}

std::filesystem::path temp_sibling(const std::filesystem::path& path) {
  std::string name = path.filename().string();
  name.insert(name.begin(), '.');
  name.append(".tmp-").append(std::to_string(::getpid()));
  return path.parent_path() / name;
}

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  const std::filesystem::path temp = temp_sibling(path);
  {
    DurableFile file(temp);
    file.write(bytes.data(), bytes.size());
    file.commit();
  }
  commit_temp_file(temp, path);
}

void commit_temp_file(const std::filesystem::path& temp, const std::filesystem::path& path) {
  try {
    durable_rename(temp, path);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw;
  }
}

std::string read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  TUPE_CHECK(in.good(), path.string() << ": cannot read: " << cause());
  std::ostringstream os;
  os << in.rdbuf();
  TUPE_CHECK(!in.bad(), path.string() << ": read failed: " << cause());
  return os.str();
}

std::string to_hex(const uint8_t* data, size_t size_bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * size_bytes, '0');
  for (size_t i = 0; i < size_bytes; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

std::vector<uint8_t> from_hex(std::string_view hex, const std::string& where) {
  TUPE_CHECK(hex.size() % 2 == 0, where << ": hex text has odd length " << hex.size());
  auto digit = [&](size_t i) -> uint8_t {
    const char c = hex[i];
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<uint8_t>(c - 'A' + 10);
    TUPE_FAIL(where << ": not a hex digit at character " << i);
  };
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(digit(2 * i) << 4 | digit(2 * i + 1));
  return out;
}

}  // namespace tupe::checkpoint
