// SafetensorsFile and write_safetensors: exact round trips, a hand-made file as an oracle that does
// not depend on our writer, and one test per kind of bad file.
#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "io/io_test_util.h"

namespace ringlm::io {
namespace {

using nlohmann::json;
using testing::error_of;
using testing::expect_mentions;
using testing::TempDir;
using testing::write_raw_safetensors;

struct Source {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

std::vector<Source> every_dtype_sources() {
  std::mt19937 rng(1234);
  std::vector<Source> out = {
      {"f32.weight", DType::F32, {3, 5}, {}}, {"bf16.weight", DType::BF16, {2, 3, 4}, {}},
      {"f16.bias", DType::F16, {7}, {}},      {"i32.ids", DType::I32, {2, 2}, {}},
      {"u8.codes", DType::U8, {3, 3}, {}},    {"u32.packed", DType::U32, {1, 2, 3, 4}, {}},
      {"scalar", DType::F32, {}, {}},         {"empty", DType::BF16, {0, 4}, {}},
  };
  for (Source& s : out) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    s.bytes.resize(static_cast<size_t>(n) * dtype_size(s.dtype));
    for (unsigned char& b : s.bytes) b = static_cast<unsigned char>(rng() & 0xff);
  }
  return out;
}

std::vector<TensorToWrite> to_write(const std::vector<Source>& sources) {
  std::vector<TensorToWrite> out;
  for (const Source& s : sources) out.push_back({s.name, s.dtype, s.shape, s.bytes.data()});
  return out;
}

TEST(Safetensors, RoundTripEveryDtypeExactBytes) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const auto sources = every_dtype_sources();
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "round trip"}};
  write_safetensors(path, to_write(sources), metadata);

  SafetensorsFile file(path);
  EXPECT_EQ(file.path(), path);
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), sources.size());
  for (const Source& s : sources) {
    SCOPED_TRACE(s.name);
    ASSERT_TRUE(file.has(s.name));
    const TensorInfo& info = file.tensors().at(s.name);
    EXPECT_EQ(info.dtype, s.dtype);
    EXPECT_EQ(info.shape, s.shape);
    EXPECT_EQ(info.nbytes(), s.bytes.size());
    EXPECT_EQ(info.file, path);
    const Tensor t = file.get(s.name);
    EXPECT_EQ(t.dtype, s.dtype);
    EXPECT_EQ(t.device, Device::CPU);
    ASSERT_EQ(t.ndim, static_cast<int>(s.shape.size()));
    for (int d = 0; d < t.ndim; ++d)
      EXPECT_EQ(t.shape[static_cast<size_t>(d)], s.shape[static_cast<size_t>(d)]);
    EXPECT_TRUE(t.is_contiguous());
    int64_t stride = 1;  // row-major strides in elements
    for (int d = t.ndim - 1; d >= 0; --d) {
      EXPECT_EQ(t.strides[static_cast<size_t>(d)], stride) << "dim " << d;
      stride *= s.shape[static_cast<size_t>(d)];
    }
    EXPECT_EQ(t.nbytes(), s.bytes.size());
    // The writer orders data so that every tensor is aligned to its element size.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % dtype_size(s.dtype), 0u);
    if (!s.bytes.empty()) {
      EXPECT_EQ(std::memcmp(t.data, s.bytes.data(), s.bytes.size()), 0);
    }
  }
}

// Checks the written bytes with a separate parse: length prefix, padding, sorted header, offsets.
TEST(Safetensors, WriterLayoutMatchesTheFormat) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  const auto sources = every_dtype_sources();
  write_safetensors(path, to_write(sources));
  const std::string bytes = testing::read_bytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  EXPECT_EQ((8 + n) % 8, 0u) << "data section must start 8-byte aligned";
  const std::string text = bytes.substr(8, n);
  const size_t last = text.find_last_not_of(' ');
  ASSERT_NE(last, std::string::npos);
  EXPECT_EQ(text[last], '}') << "header may only be padded with spaces";
  // Keys appear in the header text in sorted order.
  std::vector<std::string> names;
  for (const Source& s : sources) names.push_back(s.name);
  std::sort(names.begin(), names.end());
  size_t pos = 0;
  for (const std::string& name : names) {
    const size_t at = text.find("\"" + name + "\"");
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_GT(at, pos) << name << " out of order";
    pos = at;
  }
  const json header = json::parse(text);
  EXPECT_FALSE(header.contains("__metadata__")) << "no metadata given, none written";
  const std::string data = bytes.substr(8 + n);
  uint64_t covered = 0;
  for (const Source& s : sources) {
    const auto begin = header[s.name]["data_offsets"][0].get<uint64_t>();
    const auto end = header[s.name]["data_offsets"][1].get<uint64_t>();
    EXPECT_EQ(header[s.name]["dtype"], std::string(dtype_name(s.dtype)));
    EXPECT_EQ(header[s.name]["shape"].get<std::vector<int64_t>>(), s.shape);
    ASSERT_EQ(end - begin, s.bytes.size());
    ASSERT_LE(end, data.size());
    EXPECT_EQ(data.compare(begin, end - begin, std::string(s.bytes.begin(), s.bytes.end())), 0)
        << s.name;
    covered += end - begin;
  }
  EXPECT_EQ(covered, data.size()) << "no stray bytes in the data section";
}

// A file made byte by byte (unpadded odd header, unaligned order, metadata), read by our reader.
TEST(Safetensors, ReadsHandMadeFile) {
  TempDir dir;
  const std::string path = dir.file("hand.safetensors");
  const std::string header =
      R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]},)"
      R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"__metadata__":{"format":"pt"}})";
  // a = 1.5f (0x3FC00000), b = {1.0, -2.0} in bf16 (0x3F80, 0xC000), all little-endian.
  const std::string data("\x00\x00\xC0\x3F\x80\x3F\x00\xC0", 8);
  write_raw_safetensors(path, header, data);
  SafetensorsFile file(path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const Tensor a = file.get("a");
  const Tensor b = file.get("b");
  EXPECT_EQ(a.dtype, DType::F32);
  float a0;  // the unpadded header leaves the data unaligned: read through memcpy
  std::memcpy(&a0, a.data, 4);
  EXPECT_EQ(a0, 1.5f);
  EXPECT_EQ(b.dtype, DType::BF16);
  EXPECT_EQ(b.shape[0], 2);
  uint16_t raw[2];
  std::memcpy(raw, b.data, 4);
  EXPECT_EQ(bf16_to_f32(raw[0]), 1.0f);
  EXPECT_EQ(bf16_to_f32(raw[1]), -2.0f);
  // Data pointer = map + 8 + N + begin.
  EXPECT_EQ(static_cast<char*>(b.data) - static_cast<char*>(a.data), 4);
  EXPECT_EQ(file.tensors().at("b").begin, 4u);
}

TEST(Safetensors, EmptyTensorListAndOverwriteAreAtomic) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  write_safetensors(path, {});
  EXPECT_TRUE(SafetensorsFile(path).tensors().empty());
  const float v = 3.0f;
  write_safetensors(path, {{"v", DType::F32, {1}, &v}});  // replaces the old file
  SafetensorsFile file(path);
  EXPECT_EQ(file.get("v").ptr<float>()[0], 3.0f);
  // No temporary files are left behind.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(Safetensors, WriterRejectsBadInput) {
  TempDir dir;
  const float v = 1.0f;
  expect_mentions(error_of([&] {
                    write_safetensors(dir.file("d.safetensors"),
                                      {{"x", DType::F32, {1}, &v}, {"x", DType::F32, {1}, &v}});
                  }),
                  {"d.safetensors", "'x'", "twice"});
  expect_mentions(error_of([&] {
                    write_safetensors(dir.file("n.safetensors"), {{"x", DType::F32, {-1}, &v}});
                  }),
                  {"n.safetensors", "'x'", "negative"});
  expect_mentions(
      error_of([&] {
        write_safetensors(dir.file("missing/dir.safetensors"), {{"x", DType::F32, {1}, &v}});
      }),
      {"missing/dir.safetensors"});
}

// ---- bad files: each error names the file and, where there is one, the tensor ----

const char* kGood = R"("dtype":"F32","shape":[4],"data_offsets":[0,16])";

std::string open_error(const std::string& path) {
  return error_of([&] { SafetensorsFile file(path); });
}

TEST(SafetensorsBadFile, TruncatedFile) {
  TempDir dir;
  const std::string path = dir.file("cut.safetensors");
  std::vector<float> x(16, 1.0f), y(16, 2.0f);
  write_safetensors(path, {{"x", DType::F32, {16}, x.data()}, {"y", DType::F32, {16}, y.data()}});
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 10);  // y is last in the data section
  expect_mentions(open_error(path), {path, "'y'", "truncated"});
}

TEST(SafetensorsBadFile, HeaderIsNotJson) {
  TempDir dir;
  const std::string path = dir.file("badjson.safetensors");
  write_raw_safetensors(path, R"({"w": {"dtype": "F32", "shape": [4], )", std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "not valid JSON"});
}

TEST(SafetensorsBadFile, HeaderIsNotAnObject) {
  TempDir dir;
  const std::string path = dir.file("array.safetensors");
  write_raw_safetensors(path, "[1, 2, 3]", "");
  expect_mentions(open_error(path), {path, "must be a JSON object"});
}

TEST(SafetensorsBadFile, HeaderLengthPastTheEnd) {
  TempDir dir;
  const std::string path = dir.file("len.safetensors");
  testing::write_bytes(path, testing::le64(1000) + R"({"w":{}})");
  expect_mentions(open_error(path), {path, "header length 1000", "past the end"});
  testing::write_bytes(path, testing::le64(~0ull) + "{}");
  expect_mentions(open_error(path), {path, "past the end"});
}

TEST(SafetensorsBadFile, HeaderLengthAboveTheCap) {
  TempDir dir;
  const std::string path = dir.file("huge_header.safetensors");
  const uint64_t claimed = 200ull << 20;
  testing::write_bytes(path, testing::le64(claimed));
  std::filesystem::resize_file(path, 8 + claimed + 16);  // sparse: the length is "in bounds"
  expect_mentions(open_error(path), {path, "exceeds", "limit"});
}

TEST(SafetensorsBadFile, FileTooShortForTheLength) {
  TempDir dir;
  const std::string path = dir.file("tiny.safetensors");
  testing::write_bytes(path, "abc");
  expect_mentions(open_error(path), {path, "3 bytes"});
  expect_mentions(open_error(dir.file("absent.safetensors")),
                  {"absent.safetensors", "cannot open"});
}

TEST(SafetensorsBadFile, UnsupportedDtypes) {
  TempDir dir;
  for (const char* dtype : {"F64", "I64", "F8_E4M3", "BOOL", "bf16"}) {
    SCOPED_TRACE(dtype);
    const std::string path = dir.file(std::string("dtype_") + dtype + ".safetensors");
    write_raw_safetensors(path,
                          std::string(R"({"model.w":{"dtype":")") + dtype +
                              R"(","shape":[2],"data_offsets":[0,16]}})",
                          std::string(16, '\0'));
    expect_mentions(open_error(path), {path, "'model.w'", std::string("'") + dtype + "'"});
  }
}

TEST(SafetensorsBadFile, DtypeOfTheWrongJsonType) {
  TempDir dir;
  const std::string path = dir.file("dtype_type.safetensors");
  write_raw_safetensors(path, R"({"w":{"dtype":4,"shape":[4],"data_offsets":[0,16]}})",
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "'dtype' must be a string"});
}

TEST(SafetensorsBadFile, ShapeTimesDtypeSizeIsNotTheByteRange) {
  TempDir dir;
  const std::string path = dir.file("mismatch.safetensors");
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                        std::string(24, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "needs 24 bytes", "span 20 bytes"});
}

TEST(SafetensorsBadFile, BadShapes) {
  TempDir dir;
  const std::string path = dir.file("shape.safetensors");
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[-1,4],"data_offsets":[0,16]}})",
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "negative dimension"});
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":"4","data_offsets":[0,16]}})",
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "'shape' must be an array"});
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,16]}})",
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "integers"});
  // Element count overflow must be caught, not wrap around to a small byte count.
  write_raw_safetensors(
      path, R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})", "");
  expect_mentions(open_error(path), {path, "'w'", "too many elements"});
}

TEST(SafetensorsBadFile, MissingOrMalformedFields) {
  TempDir dir;
  const std::string path = dir.file("fields.safetensors");
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[4]}})", std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "missing 'data_offsets'"});
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0]}})",
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "data_offsets"});
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[-16,0]}})",
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "non-negative"});
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[16,0]}})",
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "begin > end"});
  write_raw_safetensors(path, R"({"w":[1,2]})", "");
  expect_mentions(open_error(path), {path, "'w'", "must be a JSON object"});
  write_raw_safetensors(path, std::string(R"({"w":{"shape":[4],"data_offsets":[0,16]}})"),
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "missing 'dtype'"});
}

TEST(SafetensorsBadFile, OverlappingRanges) {
  TempDir dir;
  const std::string path = dir.file("overlap.safetensors");
  write_raw_safetensors(path,
                        std::string(R"({"first":{)") + kGood +
                            R"(},"second":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                        std::string(24, '\0'));
  expect_mentions(open_error(path), {path, "'first'", "'second'", "overlap"});
  // Adjacent and empty ranges are fine.
  write_raw_safetensors(path,
                        std::string(R"({"first":{)") + kGood +
                            R"(},"second":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
                            R"("empty":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})",
                        std::string(24, '\0'));
  EXPECT_EQ(SafetensorsFile(path).tensors().size(), 3u);
}

TEST(SafetensorsBadFile, RangeOutsideTheFile) {
  TempDir dir;
  const std::string path = dir.file("outside.safetensors");
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[16],"data_offsets":[0,64]}})",
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "past the end of the data section"});
}

TEST(SafetensorsBadFile, DuplicateTensorName) {
  TempDir dir;
  const std::string path = dir.file("dup.safetensors");
  write_raw_safetensors(path, std::string(R"({"w":{)") + kGood + R"(},"w":{)" + kGood + "}}",
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "'w'", "twice"});
}

TEST(SafetensorsBadFile, MetadataMustHoldStrings) {
  TempDir dir;
  const std::string path = dir.file("meta.safetensors");
  write_raw_safetensors(path, std::string(R"({"__metadata__":{"n":3},"w":{)") + kGood + "}}",
                        std::string(16, '\0'));
  expect_mentions(open_error(path), {path, "__metadata__", "'n'"});
}

TEST(SafetensorsBadFile, MissingTensorAndTooManyDims) {
  TempDir dir;
  const std::string path = dir.file("dims.safetensors");
  write_raw_safetensors(path,
                        R"({"conv3d":{"dtype":"U8","shape":[1,1,1,2,2],"data_offsets":[0,4]}})",
                        std::string(4, '\0'));
  SafetensorsFile file(path);  // 5-D tensors are listed (inspect) ...
  EXPECT_EQ(file.tensors().at("conv3d").shape.size(), 5u);
  // ... but cannot become a Tensor view.
  expect_mentions(error_of([&] { file.get("conv3d"); }), {path, "'conv3d'", "5 dimensions"});
  expect_mentions(error_of([&] { file.get("nope"); }), {path, "missing tensor 'nope'"});
}

}  // namespace
}  // namespace ringlm::io
