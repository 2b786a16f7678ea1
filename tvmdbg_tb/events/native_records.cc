// Trace records framed in C++ (see native_records.py): the writer's per-record work for a
// batch of serialized traces, in one call instead of a Python loop.
//
// Each record is what writer.py's Python path writes, byte for byte: the TFRecord framing
// (u64 length, its masked CRC32C, the data, the data's masked CRC32C) around a DebugEvent
// whose data is the envelope prefix, the trace field's length, the trace's serialized
// fields and its `index` (field 13, sfixed64).
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#if defined(__x86_64__) || defined(_M_X64)
#include <nmmintrin.h>
#define TVMDBG_HAVE_SSE42 1
#endif

namespace {

using tvm::ffi::Bytes;

constexpr uint32_t kMaskDelta = 0xA282EAD8u;
constexpr uint8_t kIndexTag = 13 << 3 | 1;  // GraphExecutionTrace.index, fixed64

struct Table {
  uint32_t t[8][256];
  Table() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
  }
};

uint32_t Crc32cTable(const uint8_t* p, size_t n) {
  static const Table table;
  const auto& t = table.t;
  uint32_t crc = 0xFFFFFFFFu;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
          t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = t[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

#ifdef TVMDBG_HAVE_SSE42
__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(const uint8_t* p, size_t n) {
  uint64_t crc = 0xFFFFFFFFu;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc = _mm_crc32_u64(crc, word);
    p += 8;
    n -= 8;
  }
  uint32_t c = static_cast<uint32_t>(crc);
  while (n--) c = _mm_crc32_u8(c, *p++);
  return c ^ 0xFFFFFFFFu;
}
#endif

uint32_t Crc32c(const uint8_t* p, size_t n) {
#ifdef TVMDBG_HAVE_SSE42
  static const bool sse42 = __builtin_cpu_supports("sse4.2");
  if (sse42) return Crc32cSse42(p, n);
#endif
  return Crc32cTable(p, n);
}

uint32_t Masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

void PutLe(std::string* out, size_t at, uint64_t value, int width) {
  for (int k = 0; k < width; ++k) (*out)[at + k] = static_cast<char>((value >> (8 * k)) & 0xFF);
}

void AppendLe(std::string* out, uint64_t value, int width) {
  for (int k = 0; k < width; ++k) out->push_back(static_cast<char>((value >> (8 * k)) & 0xFF));
}

void AppendVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

struct Span {
  const char* data;
  size_t size;
};

// Appends one record: its payload is the concatenation of parts, its index `index`.
void AppendRecord(std::string* out, const Bytes& prefix, const Span* parts, int num_parts, int64_t index) {
  size_t size = 0;
  for (int p = 0; p < num_parts; ++p) size += parts[p].size;
  const size_t record = out->size();
  out->append(12, '\0');  // the length and its CRC, filled below
  const size_t data = out->size();
  out->append(prefix.data(), prefix.size());
  AppendVarint(out, static_cast<uint64_t>(size) + 9);
  for (int p = 0; p < num_parts; ++p) out->append(parts[p].data, parts[p].size);
  out->push_back(static_cast<char>(kIndexTag));
  AppendLe(out, static_cast<uint64_t>(index), 8);
  const size_t data_size = out->size() - data;
  PutLe(out, record, data_size, 8);
  PutLe(out, record + 8, Masked(Crc32c(reinterpret_cast<const uint8_t*>(out->data()) + record, 8)), 4);
  AppendLe(out, Masked(Crc32c(reinterpret_cast<const uint8_t*>(out->data()) + data, data_size)), 4);
}

uint32_t U32At(const Bytes& bytes, size_t k) {
  uint32_t value;
  std::memcpy(&value, bytes.data() + 4 * k, 4);
  return value;
}

// frame_traces(prefix, payloads, lengths, first): payloads holds n serialized traces end to
// end, lengths their sizes (n little-endian u32); trace k gets index first + k. Returns n
// little-endian u64 record sizes followed by the n records.
Bytes frame_traces(Bytes prefix, Bytes payloads, Bytes lengths, int64_t first) {
  const size_t n = lengths.size() / 4;
  std::string out;
  out.reserve(n * (8 + 12 + prefix.size() + 3 + 9 + 4) + payloads.size());
  out.resize(n * 8);
  size_t offset = 0;
  for (size_t k = 0; k < n; ++k) {
    const uint32_t size = U32At(lengths, k);
    if (offset + size > payloads.size()) throw std::runtime_error("frame_traces: lengths exceed the payloads");
    const size_t record = out.size();
    const Span part{payloads.data() + offset, size};
    AppendRecord(&out, prefix, &part, 1, first + static_cast<int64_t>(k));
    PutLe(&out, 8 * k, out.size() - record, 8);
    offset += size;
  }
  if (offset != payloads.size()) throw std::runtime_error("frame_traces: payloads longer than their lengths");
  return Bytes(std::move(out));
}

// frame_trace_parts(prefix, statics, offsets, which, middle, tails, width, first): trace k's
// payload is static which[k] (bytes offsets[i] to offsets[i + 1] of statics), then middle,
// then bytes k * width to (k + 1) * width of tails. Returns what frame_traces returns.
Bytes frame_trace_parts(Bytes prefix, Bytes statics, Bytes offsets, Bytes which, Bytes middle, Bytes tails,
                        int64_t width, int64_t first) {
  const size_t n = which.size() / 4;
  const size_t num_statics = offsets.size() / 4;
  if (num_statics == 0 || width < 0 || tails.size() != n * static_cast<size_t>(width)) {
    throw std::runtime_error("frame_trace_parts: tails do not match the traces");
  }
  std::string out;
  out.reserve(n * (8 + 12 + prefix.size() + 3 + 9 + 4 + middle.size() + width + 64));
  out.resize(n * 8);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = U32At(which, k);
    if (i + 1 >= num_statics) throw std::runtime_error("frame_trace_parts: a static out of range");
    const uint32_t begin = U32At(offsets, i), end = U32At(offsets, i + 1);
    if (begin > end || end > statics.size()) throw std::runtime_error("frame_trace_parts: bad static offsets");
    const size_t record = out.size();
    const Span parts[3] = {{statics.data() + begin, end - begin},
                           {middle.data(), middle.size()},
                           {tails.data() + k * width, static_cast<size_t>(width)}};
    AppendRecord(&out, prefix, parts, 3, first + static_cast<int64_t>(k));
    PutLe(&out, 8 * k, out.size() - record, 8);
  }
  return Bytes(std::move(out));
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(frame_traces, frame_traces);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(frame_trace_parts, frame_trace_parts);
