// Trace records framed in C++ (see native_records.py): the writer's per-record work for a
// batch of serialized traces, in one call instead of a Python loop. A CPython extension:
// a call costs ~0.1 us, so even a call's handful of traces gains from it.
//
// Each record is what writer.py's Python path writes, byte for byte: the TFRecord framing
// (u64 length, its masked CRC32C, the data, the data's masked CRC32C) around a DebugEvent
// whose data is the envelope prefix, the trace field's length, the trace's serialized
// fields and its `index` (field 13, sfixed64).
#include "python_buffer.h"

#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#if defined(__x86_64__) || defined(_M_X64)
#include <nmmintrin.h>
#define TVMDBG_HAVE_SSE42 1
#endif

namespace {

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
void AppendRecord(std::string* out, Span prefix, const Span* parts, int num_parts, int64_t index) {
  size_t size = 0;
  for (int p = 0; p < num_parts; ++p) size += parts[p].size;
  const size_t record = out->size();
  out->append(12, '\0');  // the length and its CRC, filled below
  const size_t data = out->size();
  out->append(prefix.data, prefix.size);
  AppendVarint(out, static_cast<uint64_t>(size) + 9);
  for (int p = 0; p < num_parts; ++p) out->append(parts[p].data, parts[p].size);
  out->push_back(static_cast<char>(kIndexTag));
  AppendLe(out, static_cast<uint64_t>(index), 8);
  const size_t data_size = out->size() - data;
  PutLe(out, record, data_size, 8);
  PutLe(out, record + 8, Masked(Crc32c(reinterpret_cast<const uint8_t*>(out->data()) + record, 8)), 4);
  AppendLe(out, Masked(Crc32c(reinterpret_cast<const uint8_t*>(out->data()) + data, data_size)), 4);
}

using tvmdbg::Buffer;

bool GetBytes(PyObject* object, const char* what, Span* out) {
  if (!PyBytes_Check(object)) {
    PyErr_Format(PyExc_TypeError, "%s must be bytes, not %.100s", what, Py_TYPE(object)->tp_name);
    return false;
  }
  *out = {PyBytes_AS_STRING(object), static_cast<size_t>(PyBytes_GET_SIZE(object))};
  return true;
}

// (records end to end as bytes, [each record's size]); out holds n u64 sizes first.
PyObject* Result(const std::string& out, size_t n) {
  PyObject* sizes = PyList_New(static_cast<Py_ssize_t>(n));
  if (sizes == nullptr) return nullptr;
  for (size_t k = 0; k < n; ++k) {
    uint64_t size;
    std::memcpy(&size, out.data() + 8 * k, 8);
    PyList_SET_ITEM(sizes, static_cast<Py_ssize_t>(k), PyLong_FromUnsignedLongLong(size));
  }
  PyObject* blob = PyBytes_FromStringAndSize(out.data() + 8 * n, static_cast<Py_ssize_t>(out.size() - 8 * n));
  if (blob == nullptr) {
    Py_DECREF(sizes);
    return nullptr;
  }
  return Py_BuildValue("(NN)", blob, sizes);
}

bool CheckArgs(Py_ssize_t nargs, Py_ssize_t want, const char* name) {
  if (nargs == want) return true;
  PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, want, nargs);
  return false;
}

// frame_traces(prefix: bytes, payloads: sequence of bytes, first: int) -> (bytes, [int]):
// payload k gets index first + k.
PyObject* FrameTraces(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!CheckArgs(nargs, 3, "frame_traces")) return nullptr;
  Span prefix;
  if (!GetBytes(args[0], "prefix", &prefix)) return nullptr;
  const long long first = PyLong_AsLongLong(args[2]);
  if (first == -1 && PyErr_Occurred()) return nullptr;
  PyObject* items = PySequence_Fast(args[1], "payloads must be a sequence of bytes");
  if (items == nullptr) return nullptr;
  const size_t n = static_cast<size_t>(PySequence_Fast_GET_SIZE(items));
  PyObject** item = PySequence_Fast_ITEMS(items);
  PyObject* result = nullptr;
  try {
    std::string out;
    size_t total = 0;
    for (size_t k = 0; k < n; ++k) total += PyBytes_Check(item[k]) ? PyBytes_GET_SIZE(item[k]) : 0;
    out.reserve(n * (8 + 12 + prefix.size + 10 + 9 + 4) + total);
    out.resize(n * 8);
    size_t k = 0;
    for (; k < n; ++k) {
      Span part;
      if (!GetBytes(item[k], "each payload", &part)) break;
      const size_t record = out.size();
      AppendRecord(&out, prefix, &part, 1, first + static_cast<long long>(k));
      PutLe(&out, 8 * k, out.size() - record, 8);
    }
    if (k == n) result = Result(out, n);
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  }
  Py_DECREF(items);
  return result;
}

// The records of frame_trace_parts' arguments after the prefix (statics, which, middle,
// tails, width, first), each data starting with prefix.
PyObject* PartsRecords(Span prefix, PyObject* const* args) {
  Span middle;
  Buffer which, tails;
  if (!which.Get(args[1], "which") || !GetBytes(args[2], "middle", &middle) || !tails.Get(args[3], "tails")) {
    return nullptr;
  }
  if (!PyList_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "statics must be a list of bytes");
    return nullptr;
  }
  const long long width = PyLong_AsLongLong(args[4]);
  const long long first = PyLong_AsLongLong(args[5]);
  if (PyErr_Occurred()) return nullptr;
  const size_t n = which.size() / 4;
  const size_t num_statics = static_cast<size_t>(PyList_GET_SIZE(args[0]));
  if (which.size() % 4 != 0 || width < 0 || tails.size() != n * static_cast<size_t>(width)) {
    PyErr_SetString(PyExc_ValueError, "frame_trace_parts: tails do not match the traces");
    return nullptr;
  }
  try {
    std::string out;
    out.reserve(n * (8 + 12 + prefix.size + 10 + 9 + 4 + middle.size + width + 96));
    out.resize(n * 8);
    for (size_t k = 0; k < n; ++k) {
      uint32_t i;
      std::memcpy(&i, which.data() + 4 * k, 4);
      if (i >= num_statics) {
        PyErr_SetString(PyExc_ValueError, "frame_trace_parts: a static out of range");
        return nullptr;
      }
      Span head;
      if (!GetBytes(PyList_GET_ITEM(args[0], i), "each static", &head)) return nullptr;
      const size_t record = out.size();
      const Span parts[3] = {head, middle, {tails.data() + k * width, static_cast<size_t>(width)}};
      AppendRecord(&out, prefix, parts, 3, first + static_cast<long long>(k));
      PutLe(&out, 8 * k, out.size() - record, 8);
    }
    return Result(out, n);
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
}

// frame_trace_parts(prefix, statics, which, middle, tails, width, first) -> (bytes, [int]):
// trace k's payload is statics[which[k]] (which: u32 each), then middle, then bytes
// k * width to (k + 1) * width of tails; its index first + k.
PyObject* FrameTraceParts(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!CheckArgs(nargs, 7, "frame_trace_parts")) return nullptr;
  Span prefix;
  if (!GetBytes(args[0], "prefix", &prefix)) return nullptr;
  return PartsRecords(prefix, args + 1);
}

// Appends one framed record whose data is prefix, tag, varint(payload size), payload (an
// Execution: writer.py's records.encode of the same bytes).
void AppendMessageRecord(std::string* out, Span prefix, uint8_t tag, Span payload) {
  const size_t record = out->size();
  out->append(12, '\0');
  const size_t data = out->size();
  out->append(prefix.data, prefix.size);
  out->push_back(static_cast<char>(tag));
  AppendVarint(out, payload.size);
  out->append(payload.data, payload.size);
  const size_t data_size = out->size() - data;
  PutLe(out, record, data_size, 8);
  PutLe(out, record + 8, Masked(Crc32c(reinterpret_cast<const uint8_t*>(out->data()) + record, 8)), 4);
  AppendLe(out, Masked(Crc32c(reinterpret_cast<const uint8_t*>(out->data()) + data, data_size)), 4);
}

constexpr uint8_t kExecutionTag = 8 << 3 | 2;  // DebugEvent.execution
constexpr uint8_t kTraceTag = 9 << 3 | 2;      // DebugEvent.graph_execution_trace

// frame_call(envelope, execution, statics, which, middle, tails, width, first)
//   -> (execution record, trace records, sizes):
// one VM call's records in one call: its Execution (bytes) framed as a record, and its
// traces as frame_trace_parts frames them with the envelope and the trace field's tag.
PyObject* FrameCall(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!CheckArgs(nargs, 8, "frame_call")) return nullptr;
  Span envelope, execution;
  if (!GetBytes(args[0], "envelope", &envelope) || !GetBytes(args[1], "execution", &execution)) return nullptr;
  try {
    std::string record;
    record.reserve(12 + envelope.size + 11 + execution.size + 4);
    AppendMessageRecord(&record, envelope, kExecutionTag, execution);
    std::string prefix(envelope.data, envelope.size);
    prefix.push_back(static_cast<char>(kTraceTag));
    PyObject* traces = PartsRecords({prefix.data(), prefix.size()}, args + 2);
    if (traces == nullptr) return nullptr;
    PyObject* framed = PyBytes_FromStringAndSize(record.data(), static_cast<Py_ssize_t>(record.size()));
    if (framed == nullptr) {
      Py_DECREF(traces);
      return nullptr;
    }
    PyObject* result = Py_BuildValue("(NOO)", framed, PyTuple_GET_ITEM(traces, 0), PyTuple_GET_ITEM(traces, 1));
    Py_DECREF(traces);
    return result;
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
}

PyMethodDef kMethods[] = {
    {"frame_traces", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FrameTraces)), METH_FASTCALL,
     "frame_traces(prefix, payloads, first) -> (records, sizes)"},
    {"frame_trace_parts", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FrameTraceParts)),
     METH_FASTCALL, "frame_trace_parts(prefix, statics, which, middle, tails, width, first) -> (records, sizes)"},
    {"frame_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FrameCall)), METH_FASTCALL,
     "frame_call(envelope, execution, statics, which, middle, tails, width, first) -> (record, records, sizes)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "native_records", "TFRecord framing of trace batches.", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit_native_records() { return PyModule_Create(&kModule); }
