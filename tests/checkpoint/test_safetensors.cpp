// safetensors reader/writer: files written by Python's safetensors read correctly, ours are
// read by Python (all dtypes, metadata), and truncated or corrupt files give one-line errors
// naming the file and the tensor.
#include <algorithm>
#include <fstream>
#include <functional>
#include <map>

#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace tupe::checkpoint {
namespace {

using testing::TempDir;

/// The reference tensors of safetensors_ref.py, built element by element from the index
/// i in [0, 24) and c = i - 12 (shape [2, 3, 4]).
std::map<std::string, at::Tensor> reference_tensors() {
  std::map<std::string, at::Tensor> out;
  auto make = [&](const std::string& name, at::ScalarType dtype, const std::function<void(void*, int64_t)>& fill) {
    at::Tensor t = at::empty({2, 3, 4}, dtype);
    for (int64_t i = 0; i < 24; ++i) fill(t.data_ptr(), i);
    out[name] = t;
  };
  make("t_f64", at::kDouble, [](void* p, int64_t i) { static_cast<double*>(p)[i] = static_cast<double>(i - 12) * 0.1; });
  make("t_f32", at::kFloat, [](void* p, int64_t i) { static_cast<float*>(p)[i] = static_cast<float>(i - 12) * 0.375f; });
  make("t_f16", at::kHalf,
       [](void* p, int64_t i) { static_cast<c10::Half*>(p)[i] = c10::Half(static_cast<float>(i - 12) * 0.375f); });
  make("t_bf16", at::kBFloat16,
       [](void* p, int64_t i) { static_cast<c10::BFloat16*>(p)[i] = c10::BFloat16(static_cast<float>(i - 12) * 0.375f); });
  make("t_i64", at::kLong, [](void* p, int64_t i) { static_cast<int64_t*>(p)[i] = (i - 12) * 1000000007LL; });
  make("t_i32", at::kInt, [](void* p, int64_t i) { static_cast<int32_t*>(p)[i] = static_cast<int32_t>((i - 12) * 1000 + 7); });
  make("t_i16", at::kShort, [](void* p, int64_t i) { static_cast<int16_t*>(p)[i] = static_cast<int16_t>((i - 12) * 100 + 7); });
  make("t_i8", at::kChar, [](void* p, int64_t i) { static_cast<int8_t*>(p)[i] = static_cast<int8_t>((i - 12) * 5); });
  make("t_u8", at::kByte, [](void* p, int64_t i) { static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(i * 10); });
  make("t_bool", at::kBool, [](void* p, int64_t i) { static_cast<bool*>(p)[i] = i % 3 == 0; });
  out["scalar_f32"] = at::full({}, 3.25, at::kFloat);
  out["empty_f32"] = at::zeros({0, 5}, at::kFloat);
  return out;
}

const TensorMetadata kPythonMetadata = {{"format", "pt"}, {"note", "written by safetensors_ref.py \xc3\xbc"}};

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A file with `header` (padded to 8) and `data_bytes` bytes of data (value 1).
std::string make_file(std::string header, size_t data_bytes) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\x01');
}

/// The error message of read_safetensors(path), or "" when it does not throw.
std::string read_error(const std::filesystem::path& path) {
  try {
    read_safetensors(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointSafetensors, ReadsFilesWrittenByPythonAndRejectsEveryTruncation) {
  TempDir dir;
  const auto path = dir / "python.safetensors";
  std::string log;
  ASSERT_EQ(testing::run_python("safetensors_ref.py", "write '" + path.string() + "'", &log), 0) << log;
  const SafetensorsContents got = read_safetensors(path);
  EXPECT_EQ(got.metadata, kPythonMetadata);
  const auto expected = reference_tensors();
  ASSERT_EQ(got.tensors.size(), expected.size());
  for (const auto& [name, t] : got.tensors) {
    ASSERT_TRUE(expected.count(name)) << name;
    EXPECT_TRUE(testing::bitwise_equal(t, expected.at(name))) << name << ": " << t << " vs " << expected.at(name);
  }

  // Every truncation of that real file is an error naming the file (one line).
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto cut = dir / "cut.safetensors";
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_bytes(cut, bytes.substr(0, n));
    const std::string msg = read_error(cut);
    ASSERT_FALSE(msg.empty()) << "truncated to " << n << " of " << bytes.size() << " bytes but read fine";
    ASSERT_EQ(msg.find('\n'), std::string::npos) << msg;
    ASSERT_EQ(msg.rfind(cut.string(), 0), 0u) << msg;
  }
  // The tail tensor is named when only data bytes are missing.
  write_bytes(cut, bytes.substr(0, bytes.size() - 1));
  const std::string msg = read_error(cut);
  EXPECT_NE(msg.find("tensor '"), std::string::npos) << msg;
  EXPECT_NE(msg.find("file truncated"), std::string::npos) << msg;
}

TEST(CheckpointSafetensors, PythonReadsOurFiles) {
  TempDir dir;
  const auto path = dir / "ours.safetensors";
  NamedTensors tensors;
  for (const auto& [name, t] : reference_tensors()) {
    // Hand over some tensors as non-contiguous views: the writer must lay them out densely.
    tensors.emplace_back(name, t.dim() == 3 ? t.transpose(0, 2).contiguous().transpose(0, 2) : t);
  }
  ASSERT_GT(std::count_if(tensors.begin(), tensors.end(), [](const auto& nt) { return !nt.second.is_contiguous(); }), 0);
  write_safetensors(path, tensors, kPythonMetadata);
  std::string log;
  EXPECT_EQ(testing::run_python("safetensors_ref.py", "check '" + path.string() + "'", &log), 0) << log;
  // Header length is a multiple of 8 and no temporary file is left behind.
  std::ifstream in(path, std::ios::binary);
  uint8_t len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  EXPECT_EQ(len[0] % 8, 0);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()), 1);
}

TEST(CheckpointSafetensors, RoundTripIsBitwiseAndAligned) {
  TempDir dir;
  const auto path = dir / "rt.safetensors";
  NamedTensors tensors = {{"b.bias", at::randn({7}, at::kFloat)},
                          {"a.weight", at::randn({5, 3}, at::kDouble).t()},
                          {"mask", at::randint(0, 2, {9}, at::kLong).to(at::kBool)},
                          {"half", at::randn({4, 4}, at::kFloat).to(at::kHalf)}};
  write_safetensors(path, tensors, {});
  const SafetensorsContents got = read_safetensors(path);
  EXPECT_TRUE(got.metadata.empty());
  ASSERT_EQ(got.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const at::Tensor back = find_tensor(got.tensors, name);
    ASSERT_TRUE(back.defined()) << name;
    EXPECT_TRUE(testing::bitwise_equal(back, t)) << name;
  }
  // Layout: item size descending, so 8-byte tensors come first.
  EXPECT_EQ(got.tensors.front().first, "a.weight");
  EXPECT_EQ(got.tensors.back().first, "mask");
}

TEST(CheckpointSafetensors, WriterRejectsBadNames) {
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  const NamedTensors dup = {{"x", at::zeros({1})}, {"x", at::zeros({2})}};
  try {
    write_safetensors(path, dup);
    FAIL() << "duplicate name accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x': duplicate name"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_safetensors(path, {{"__metadata__", at::zeros({1})}}), Error);
  EXPECT_THROW(write_safetensors(path, {{"c", at::zeros({1}, at::kComplexFloat)}}), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // no temporary left behind
}

struct CorruptCase {
  std::string what;
  std::string bytes;
  std::string expected_fragment;  ///< must appear in the message
};

TEST(CheckpointSafetensors, CorruptFilesGiveOneLineErrorsNamingFileAndTensor) {
  TempDir dir;
  const std::vector<CorruptCase> cases = {
      {"short", std::string("\x05\x00\x00", 3), "shorter than the 8-byte header length"},
      {"huge header length", std::string("\x00\x10\x00\x00\x00\x00\x00\x00{}      ", 16), "exceeds the file size"},
      {"bad json", make_file(R"({"a": {"dtype": "F32",)", 0), "not valid JSON"},
      {"not an object", make_file("[1, 2]", 0), "not an object"},
      {"unknown dtype", make_file(R"({"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", 2),
       "tensor 'w': unsupported dtype 'F8_E4M3'"},
      {"shape vs bytes", make_file(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
       "tensor 'w': shape [3] x F32 needs 12 bytes"},
      {"gap", make_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})", 20),
       "tensor 'b': data_offsets [12, 20] leave a gap"},
      {"overlap", make_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12),
       "tensor 'b': data_offsets [4, 12] overlap"},
      {"out of bounds", make_file(R"({"a": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})", 8),
       "tensor 'a': data_offsets [0, 16] exceed the data block of 8 bytes"},
      {"trailing bytes", make_file(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", 5),
       "trailing bytes"},
      {"negative shape", make_file(R"({"a": {"dtype": "U8", "shape": [-2], "data_offsets": [0, 2]}})", 2),
       "tensor 'a': shape entry -2"},
      {"offsets reversed", make_file(R"({"a": {"dtype": "U8", "shape": [0], "data_offsets": [2, 0]}})", 2),
       "tensor 'a': data_offsets begin 2 > end 0"},
      {"missing dtype", make_file(R"({"a": {"shape": [2], "data_offsets": [0, 2]}})", 2), "tensor 'a': missing"},
      {"extra field", make_file(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2], "x": 1}})", 2),
       "tensor 'a': unknown header field 'x'"},
      {"metadata not strings", make_file(R"({"__metadata__": {"k": 3}})", 0), "metadata key 'k'"},
      {"bool byte", make_file(R"({"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}})", 0) + "\x01\x02",
       "tensor 'm': BOOL byte 2"},
  };
  for (const auto& c : cases) {
    const auto path = dir / ("corrupt.safetensors");
    write_bytes(path, c.bytes);
    const std::string msg = read_error(path);
    EXPECT_NE(msg.find(c.expected_fragment), std::string::npos) << c.what << ": got '" << msg << "'";
    EXPECT_EQ(msg.rfind(path.string() + ": ", 0), 0u) << c.what << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.what << ": " << msg;
  }
  EXPECT_NE(read_error(dir / "missing.safetensors").find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace tupe::checkpoint
