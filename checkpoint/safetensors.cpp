#include "checkpoint/safetensors.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "checkpoint/durable_io.h"
#include "checkpoint/json_brief.h"
#include "common/error.h"

namespace tupe::checkpoint {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

/// Largest header the reader accepts (the Rust reference implementation's limit).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr char kMetadataKey[] = "__metadata__";

struct DtypeInfo {
  const char* name;
  at::ScalarType dtype;
};
constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool},
};

bool parse_dtype(const std::string& name, at::ScalarType* out) {
  for (const auto& d : kDtypes)
    if (name == d.name) {
      *out = d.dtype;
      return true;
    }
  return false;
}

/// One header entry, validated for its own fields.
struct Entry {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

/// An open file read with pread; closes on destruction.
class ReadFile {
 public:
  explicit ReadFile(const std::filesystem::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    TUPE_CHECK(fd_ >= 0, path.string() << ": cannot open: " << std::strerror(errno));
    struct stat st {};
    TUPE_CHECK(::fstat(fd_, &st) == 0, path.string() << ": cannot stat: " << std::strerror(errno));
    TUPE_CHECK(S_ISREG(st.st_mode), path.string() << ": not a regular file");
    size_bytes_ = static_cast<uint64_t>(st.st_size);
  }
  ~ReadFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;

  uint64_t size_bytes() const { return size_bytes_; }

  /// Reads exactly `n` bytes at `offset`; `what` names the part for the error message.
  void read_at(void* dst, uint64_t n, uint64_t offset, const std::string& what) const {
    char* p = static_cast<char*>(dst);
    while (n > 0) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30));
      const ssize_t got = ::pread(fd_, p, chunk, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      TUPE_CHECK(got > 0, path_.string() << ": " << what << ": "
                                         << (got < 0 ? std::string("read failed: ") + std::strerror(errno)
                                                     : std::string("unexpected end of file"))
                                         << " at byte offset " << offset);
      p += got;
      n -= static_cast<uint64_t>(got);
      offset += static_cast<uint64_t>(got);
    }
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t size_bytes_ = 0;
};

/// Parses one tensor entry of the header; throws naming the tensor.
Entry parse_entry(const std::string& file, const std::string& name, const nlohmann::json& v) {
  const std::string where = file + ": tensor '" + name + "'";
  TUPE_CHECK(v.is_object(), where << ": header entry is not a JSON object");
  for (const auto& [key, unused] : v.items())
    TUPE_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", where << ": unknown header field '" << key << "'");
  Entry e;
  e.name = name;
  TUPE_CHECK(v.contains("dtype") && v["dtype"].is_string(), where << ": missing or non-string 'dtype'");
  const std::string dtype = v["dtype"].get<std::string>();
  TUPE_CHECK(parse_dtype(dtype, &e.dtype),
             where << ": unsupported dtype '" << dtype << "' (expected F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
  TUPE_CHECK(v.contains("shape") && v["shape"].is_array(), where << ": missing or non-array 'shape'");
  for (const auto& d : v["shape"]) {
    TUPE_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX),
               where << ": shape entry " << json_brief(d) << " is not a non-negative integer");
    e.shape.push_back(d.get<int64_t>());
  }
  TUPE_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2 &&
                 v["data_offsets"][0].is_number_unsigned() && v["data_offsets"][1].is_number_unsigned(),
             where << ": 'data_offsets' must be two non-negative integers [begin, end]");
  e.begin = v["data_offsets"][0].get<uint64_t>();
  e.end = v["data_offsets"][1].get<uint64_t>();
  TUPE_CHECK(e.begin <= e.end, where << ": data_offsets begin " << e.begin << " > end " << e.end);
  uint64_t expected_bytes = static_cast<uint64_t>(c10::elementSize(e.dtype));
  for (int64_t d : e.shape)
    TUPE_CHECK(!__builtin_mul_overflow(expected_bytes, static_cast<uint64_t>(d), &expected_bytes),
               where << ": shape " << shape_text(e.shape) << " overflows the byte count");
  TUPE_CHECK(expected_bytes == e.end - e.begin, where << ": shape " << shape_text(e.shape) << " x " << dtype << " needs "
                                                      << expected_bytes << " bytes but data_offsets [" << e.begin
                                                      << ", " << e.end << "] hold " << (e.end - e.begin));
  return e;
}

}  // namespace

std::string safetensors_dtype_name(at::ScalarType dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  TUPE_FAIL("safetensors: dtype " << c10::toString(dtype) << " is not supported (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
}

SafetensorsContents read_safetensors(const std::filesystem::path& path) {
  const std::string file = path.string();
  ReadFile in(path);
  TUPE_CHECK(in.size_bytes() >= 8,
             file << ": header: file is " << in.size_bytes() << " bytes, shorter than the 8-byte header length");
  uint8_t len_bytes[8];
  in.read_at(len_bytes, 8, 0, "header length");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | len_bytes[i];
  TUPE_CHECK(header_bytes >= 2 && header_bytes <= kMaxHeaderBytes,
             file << ": header: header length " << header_bytes << " is outside [2, " << kMaxHeaderBytes << "]");
  TUPE_CHECK(header_bytes <= in.size_bytes() - 8, file << ": header: header length " << header_bytes
                                                       << " exceeds the file size " << in.size_bytes()
                                                       << " minus 8 (file truncated?)");
  std::string header(header_bytes, '\0');
  in.read_at(header.data(), header_bytes, 8, "header");
  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = in.size_bytes() - data_start;

  nlohmann::json root;
  try {
    root = nlohmann::json::parse(header);
  } catch (const nlohmann::json::parse_error& e) {
    TUPE_FAIL(file << ": header: not valid JSON at header byte " << e.byte << " (file byte offset " << 8 + e.byte
                   << ")");
  } catch (const nlohmann::json::exception& e) {  // e.g. a number beyond double's range
    TUPE_FAIL(file << ": header: unreadable JSON (" << e.what() << ")");
  }
  TUPE_CHECK(root.is_object(), file << ": header: the JSON header is not an object");

  SafetensorsContents out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : root.items()) {
    if (name == kMetadataKey) {
      TUPE_CHECK(value.is_object(), file << ": header: '__metadata__' is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        TUPE_CHECK(v.is_string(), file << ": header: metadata key '" << k << "' has a non-string value " << json_brief(v));
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(file, name, value));
  }
  // The tensors must tile [0, data_bytes) exactly, in offset order.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected_begin = 0;
  for (const Entry& e : entries) {
    TUPE_CHECK(e.begin == expected_begin, file << ": tensor '" << e.name << "': data_offsets [" << e.begin << ", "
                                                << e.end << "] " << (e.begin > expected_begin ? "leave a gap" : "overlap")
                                                << " after byte " << expected_begin << " of the data block");
    TUPE_CHECK(e.end <= data_bytes, file << ": tensor '" << e.name << "': data_offsets [" << e.begin << ", " << e.end
                                         << "] exceed the data block of " << data_bytes
                                         << " bytes (file truncated?)");
    expected_begin = e.end;
  }
  TUPE_CHECK(expected_begin == data_bytes, file << ": header: tensors cover " << expected_begin
                                                << " bytes but the data block holds " << data_bytes
                                                << " (trailing bytes)");

  for (const Entry& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
    in.read_at(t.data_ptr(), e.end - e.begin, data_start + e.begin, "tensor '" + e.name + "'");
    if (e.dtype == at::kBool) {
      const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
      for (uint64_t i = 0; i < e.end - e.begin; ++i)
        TUPE_CHECK(bytes[i] <= 1, file << ": tensor '" << e.name << "': BOOL byte " << int(bytes[i])
                                       << " at file byte offset " << data_start + e.begin + i << " is not 0 or 1");
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors, const TensorMetadata& metadata) {
  const std::string file = path.string();
  struct Item {
    std::string name;
    at::Tensor cpu;  // contiguous, on the CPU
    std::string dtype;
  };
  std::vector<Item> items;
  items.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    TUPE_CHECK(!name.empty() && name != kMetadataKey, file << ": tensor '" << name << "': reserved or empty name");
    TUPE_CHECK(t.defined(), file << ": tensor '" << name << "': undefined tensor");
    std::string dtype;
    try {
      dtype = safetensors_dtype_name(t.scalar_type());
    } catch (const Error& e) {
      TUPE_FAIL(file << ": tensor '" << name << "': " << e.what());
    }
    items.push_back({name, t.detach().to(at::kCPU).contiguous(), dtype});
  }
  // Largest item size first, then by name: every tensor starts at a multiple of its item size.
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    const size_t sa = a.cpu.element_size(), sb = b.cpu.element_size();
    return sa != sb ? sa > sb : a.name < b.name;
  });
  for (size_t i = 1; i < items.size(); ++i)
    TUPE_CHECK(items[i].name != items[i - 1].name, file << ": tensor '" << items[i].name << "': duplicate name");

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header[kMetadataKey] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const Item& it : items) {
    const uint64_t n = static_cast<uint64_t>(it.cpu.numel()) * it.cpu.element_size();
    header[it.name] = {{"dtype", it.dtype}, {"shape", it.cpu.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  uint8_t len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(header_text.size()) >> (8 * i));

  const std::filesystem::path temp = temp_sibling(path);
  {
    DurableFile out(temp);
    out.write(len_bytes, 8);
    out.write(header_text.data(), header_text.size());
    for (const Item& it : items) out.write(it.cpu.data_ptr(), static_cast<size_t>(it.cpu.numel()) * it.cpu.element_size());
    out.commit();
  }
  commit_temp_file(temp, path);
}

}  // namespace tupe::checkpoint
