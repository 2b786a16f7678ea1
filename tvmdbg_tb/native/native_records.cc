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

char* PutLe(char* p, uint64_t value, int width) {
  for (int k = 0; k < width; ++k) *p++ = static_cast<char>((value >> (8 * k)) & 0xFF);
  return p;
}

size_t VarintSize(uint64_t value) {
  size_t n = 1;
  for (; value >= 0x80; value >>= 7) ++n;
  return n;
}

char* PutVarint(char* p, uint64_t value) {
  for (; value >= 0x80; value >>= 7) *p++ = static_cast<char>((value & 0x7F) | 0x80);
  *p++ = static_cast<char>(value);
  return p;
}

struct Span {
  const char* data;
  size_t size;
};

char* PutSpan(char* p, Span span) {
  std::memcpy(p, span.data, span.size);
  return p + span.size;
}

// A record is u64 length | masked CRC of it | data | masked CRC of the data.
constexpr size_t kFraming = 8 + 4 + 4;

// Frames the data written from out + 12 to end: the length and its CRC before, the data's
// CRC after; returns the record's end.
char* Frame(char* out, char* end) {
  const size_t data_size = static_cast<size_t>(end - (out + 12));
  PutLe(out, data_size, 8);
  PutLe(out + 8, Masked(Crc32c(reinterpret_cast<const uint8_t*>(out), 8)), 4);
  return PutLe(end, Masked(Crc32c(reinterpret_cast<const uint8_t*>(out + 12), data_size)), 4);
}

// The size of a trace record whose payload (the trace's fields before its index) has
// `payload` bytes: prefix, the trace field's length, the payload, its index field.
size_t TraceRecordSize(Span prefix, size_t payload) {
  return kFraming + prefix.size + VarintSize(payload + 9) + payload + 9;
}

// Writes one trace record at out: its payload is the concatenation of parts (`payload`
// bytes), its index `index`; returns the record's end.
char* PutTraceRecord(char* out, Span prefix, const Span* parts, int num_parts, size_t payload, int64_t index) {
  char* p = PutSpan(out + 12, prefix);
  p = PutVarint(p, payload + 9);
  for (int k = 0; k < num_parts; ++k) p = PutSpan(p, parts[k]);
  *p++ = static_cast<char>(kIndexTag);
  p = PutLe(p, static_cast<uint64_t>(index), 8);
  return Frame(out, p);
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

// A new tuple of new references (stolen), or nullptr (all released) when one is nullptr.
PyObject* TupleOf(PyObject* const* items, Py_ssize_t n) {
  PyObject* tuple = nullptr;
  bool complete = true;
  for (Py_ssize_t k = 0; k < n; ++k) complete = complete && items[k] != nullptr;
  if (complete) tuple = PyTuple_New(n);
  for (Py_ssize_t k = 0; k < n; ++k) {
    if (tuple != nullptr) {
      PyTuple_SET_ITEM(tuple, k, items[k]);
    } else {
      Py_XDECREF(items[k]);
    }
  }
  return tuple;
}

// Records written straight into one bytes object: the caller sizes them first (records:
// their total size), then writes each, recording its size.
class Records {
 public:
  Records(size_t total, size_t n)
      : blob_(PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(total))),
        sizes_(PyList_New(static_cast<Py_ssize_t>(n))) {
    at_ = blob_ != nullptr ? PyBytes_AS_STRING(blob_) : nullptr;
  }
  ~Records() {
    Py_XDECREF(blob_);
    Py_XDECREF(sizes_);
  }
  bool ok() const { return blob_ != nullptr && sizes_ != nullptr; }
  char* at() const { return at_; }
  // Records that the record k ends at `end`.
  bool Ended(size_t k, char* end) {
    PyObject* size = PyLong_FromSize_t(static_cast<size_t>(end - at_));
    if (size == nullptr) return false;
    PyList_SET_ITEM(sizes_, static_cast<Py_ssize_t>(k), size);
    at_ = end;
    return true;
  }
  // (records end to end as bytes, [each record's size]); the object is spent.
  PyObject* Result() {
    PyObject* items[2] = {blob_, sizes_};
    blob_ = sizes_ = nullptr;
    return TupleOf(items, 2);
  }

 private:
  PyObject* blob_;
  PyObject* sizes_;
  char* at_;
};

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
  size_t total = 0;
  size_t k = 0;
  for (Span part; k < n && GetBytes(item[k], "each payload", &part); ++k) total += TraceRecordSize(prefix, part.size);
  if (k == n) {
    Records records(total, n);
    bool ok = records.ok();
    for (k = 0; ok && k < n; ++k) {
      const Span part = {PyBytes_AS_STRING(item[k]), static_cast<size_t>(PyBytes_GET_SIZE(item[k]))};
      ok = records.Ended(k, PutTraceRecord(records.at(), prefix, &part, 1, part.size, first + static_cast<long long>(k)));
    }
    if (ok) result = records.Result();
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
  auto head = [&](size_t k, Span* out) {
    uint32_t i;
    std::memcpy(&i, which.data() + 4 * k, 4);
    if (i >= num_statics) {
      PyErr_SetString(PyExc_ValueError, "frame_trace_parts: a static out of range");
      return false;
    }
    return GetBytes(PyList_GET_ITEM(args[0], i), "each static", out);
  };
  size_t total = 0;
  for (size_t k = 0; k < n; ++k) {
    Span static_part;
    if (!head(k, &static_part)) return nullptr;
    total += TraceRecordSize(prefix, static_part.size + middle.size + static_cast<size_t>(width));
  }
  Records records(total, n);
  if (!records.ok()) return nullptr;
  for (size_t k = 0; k < n; ++k) {
    Span static_part;
    head(k, &static_part);  // checked above
    const Span parts[3] = {static_part, middle, {tails.data() + k * width, static_cast<size_t>(width)}};
    const size_t payload = static_part.size + middle.size + static_cast<size_t>(width);
    if (!records.Ended(k, PutTraceRecord(records.at(), prefix, parts, 3, payload, first + static_cast<long long>(k)))) {
      return nullptr;
    }
  }
  return records.Result();
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

constexpr uint8_t kExecutionTag = 8 << 3 | 2;  // DebugEvent.execution
constexpr uint8_t kTraceTag = 9 << 3 | 2;      // DebugEvent.graph_execution_trace
constexpr uint8_t kSequenceTag = 13 << 3;      // DebugEvent.sequence, a varint

// frame_call(envelope, execution, statics, which, middle, tails, width, first, sequence)
//   -> (execution record, trace records, sizes):
// one VM call's records in one call: its Execution (bytes) framed as a record (writer.py's
// records.encode of envelope, the execution field's tag and length, the Execution, and the
// record's sequence), and its traces as frame_trace_parts frames them with the envelope and
// the trace field's tag.
PyObject* FrameCall(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!CheckArgs(nargs, 9, "frame_call")) return nullptr;
  Span envelope, execution;
  if (!GetBytes(args[0], "envelope", &envelope) || !GetBytes(args[1], "execution", &execution)) return nullptr;
  const long long sequence = PyLong_AsLongLong(args[8]);
  if (sequence == -1 && PyErr_Occurred()) return nullptr;
  const size_t size = kFraming + envelope.size + 1 + VarintSize(execution.size) + execution.size + 1 +
                      VarintSize(static_cast<uint64_t>(sequence));
  PyObject* record = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
  if (record == nullptr) return nullptr;
  char* out = PyBytes_AS_STRING(record);
  char* p = PutSpan(out + 12, envelope);
  *p++ = static_cast<char>(kExecutionTag);
  p = PutSpan(PutVarint(p, execution.size), execution);
  *p++ = static_cast<char>(kSequenceTag);
  p = PutVarint(p, static_cast<uint64_t>(sequence));
  Frame(out, p);
  char prefix[64];
  if (envelope.size >= sizeof(prefix)) {
    Py_DECREF(record);
    PyErr_SetString(PyExc_ValueError, "frame_call: the envelope is too long");
    return nullptr;
  }
  std::memcpy(prefix, envelope.data, envelope.size);
  prefix[envelope.size] = static_cast<char>(kTraceTag);
  PyObject* traces = PartsRecords({prefix, envelope.size + 1}, args + 2);
  if (traces == nullptr) {
    Py_DECREF(record);
    return nullptr;
  }
  PyObject* items[3] = {record, PyTuple_GET_ITEM(traces, 0), PyTuple_GET_ITEM(traces, 1)};
  Py_INCREF(items[1]);
  Py_INCREF(items[2]);
  Py_DECREF(traces);
  return TupleOf(items, 3);
}

// join_chunks(chunks, start, ring) -> (data, ends): the writer's flush of one stream. data:
// the chunks' bytes end to end (a chunk is one record, bytes, or a run of records, a tuple
// (blob, sizes), sizes a list or a tuple of ints); ends: with ring, where each record ends in the file (start: the file's
// size), as packed int64 (the ring file's bookkeeping), else None. What _RecordFile.append
// does per chunk and per record in Python, in one call.
PyObject* JoinChunks(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!CheckArgs(nargs, 3, "join_chunks")) return nullptr;
  PyObject* chunks = PySequence_Fast(args[0], "join_chunks: chunks must be a sequence");
  if (chunks == nullptr) return nullptr;
  const long long start = PyLong_AsLongLong(args[1]);
  const int ring = PyObject_IsTrue(args[2]);
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(chunks);
  PyObject** items = PySequence_Fast_ITEMS(chunks);
  Py_ssize_t total = 0, records = 0;
  bool ok = !(start == -1 && PyErr_Occurred()) && ring >= 0;
  for (Py_ssize_t k = 0; ok && k < count; ++k) {
    PyObject* chunk = items[k];
    if (PyBytes_Check(chunk)) {
      total += PyBytes_GET_SIZE(chunk);
      ++records;
    } else if (PyTuple_Check(chunk) && PyTuple_GET_SIZE(chunk) == 2 && PyBytes_Check(PyTuple_GET_ITEM(chunk, 0)) &&
               (PyList_Check(PyTuple_GET_ITEM(chunk, 1)) || PyTuple_Check(PyTuple_GET_ITEM(chunk, 1)))) {
      total += PyBytes_GET_SIZE(PyTuple_GET_ITEM(chunk, 0));
      records += PySequence_Fast_GET_SIZE(PyTuple_GET_ITEM(chunk, 1));
    } else {
      PyErr_SetString(PyExc_TypeError, "join_chunks: a chunk is bytes or a (bytes, sizes) run");
      ok = false;
    }
  }
  PyObject* data = ok ? PyBytes_FromStringAndSize(nullptr, total) : nullptr;
  PyObject* ends = data != nullptr && ring ? PyBytes_FromStringAndSize(nullptr, records * 8) : nullptr;
  if (data == nullptr || (ring && ends == nullptr)) {
    Py_XDECREF(data);
    Py_DECREF(chunks);
    return nullptr;
  }
  char* out = PyBytes_AS_STRING(data);
  char* end_out = ends != nullptr ? PyBytes_AS_STRING(ends) : nullptr;
  long long end = start;
  for (Py_ssize_t k = 0; k < count; ++k) {
    PyObject* chunk = items[k];
    PyObject* blob = PyBytes_Check(chunk) ? chunk : PyTuple_GET_ITEM(chunk, 0);
    const Py_ssize_t size = PyBytes_GET_SIZE(blob);
    std::memcpy(out, PyBytes_AS_STRING(blob), size);
    out += size;
    if (end_out == nullptr) continue;
    if (blob == chunk) {
      end += size;
      std::memcpy(end_out, &end, 8);
      end_out += 8;
      continue;
    }
    PyObject* sizes = PyTuple_GET_ITEM(chunk, 1);  // a list or a tuple (checked above)
    for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(sizes) && !PyErr_Occurred(); ++j) {
      PyObject* size = PySequence_Fast_ITEMS(sizes)[j];
      if (!PyLong_Check(size)) {
        PyErr_SetString(PyExc_TypeError, "join_chunks: a run's sizes must be ints");
        break;
      }
      end += PyLong_AsLongLong(size);
      std::memcpy(end_out, &end, 8);
      end_out += 8;
    }
  }
  Py_DECREF(chunks);
  if (PyErr_Occurred()) {  // a size that is not an int
    Py_DECREF(data);
    Py_XDECREF(ends);
    return nullptr;
  }
  if (end_out != nullptr && end != start + total) {
    Py_DECREF(data);
    Py_DECREF(ends);
    PyErr_SetString(PyExc_ValueError, "join_chunks: a run's sizes do not add up to its bytes");
    return nullptr;
  }
  PyObject* pair[2] = {data, ends != nullptr ? ends : Py_None};
  if (ends == nullptr) Py_INCREF(Py_None);
  return TupleOf(pair, 2);
}

// -- queue_call: DebugEventsWriter.write_call's work for a compiled call ----------------------------

PyObject* s_failed;
PyObject* s_closed;
PyObject* s_lock;
PyObject* s_acquire;
PyObject* s_release;
PyObject* s_next_trace;
PyObject* s_pending;
PyObject* s_pending_bytes;
PyObject* s_eager_bytes;
PyObject* s_eager_write;
PyObject* s_fail;
PyObject* s_traces_stream;
PyObject* s_execution_stream;
PyObject* s_sequences;
PyObject* s_run_key_field;
PyObject* s_counts_health;
PyObject* s_count_locked;

bool Intern() {
  const tvmdbg::InternedName names[] = {
      {&s_failed, "_failed"},
      {&s_closed, "_closed"},
      {&s_lock, "_lock"},
      {&s_acquire, "acquire"},
      {&s_release, "release"},
      {&s_next_trace, "_next_trace"},
      {&s_pending, "_pending"},
      {&s_pending_bytes, "_pending_bytes"},
      {&s_eager_bytes, "_eager_bytes"},
      {&s_eager_write, "_eager_write"},
      {&s_fail, "_fail"},
      {&s_traces_stream, "graph_execution_traces"},  // layout.GRAPH_EXECUTION_TRACES
      {&s_execution_stream, "execution"},            // layout.EXECUTION
      {&s_sequences, "_sequences"},
      {&s_run_key_field, "_run_key_field"},
      {&s_counts_health, "_counts_health"},
      {&s_count_locked, "_count_locked"},
  };
  return tvmdbg::InternAll(names);
}

// 1 when writer.<name> is true, 0 when false, -1 on error.
int Flag(PyObject* writer, PyObject* name) {
  PyObject* value = PyObject_GetAttr(writer, name);
  const int truth = value == nullptr ? -1 : PyObject_IsTrue(value);
  Py_XDECREF(value);
  return truth;
}

// Under writer._lock: the call framed with the next trace index and execution sequence, its
// records queued, the counters advanced, and, unless it is known finite, its health counted
// (writer._count_locked); the pending byte count in *pending. False with an exception set.
bool QueueLocked(PyObject* writer, PyObject* const* framing, PyObject* nonfinite, long long* pending) {
  // Checked again under the lock: close() may have taken the last batch meanwhile.
  const int failed = Flag(writer, s_failed);
  const int closed = failed == 0 ? Flag(writer, s_closed) : 0;
  if (failed || closed) return failed >= 0 && closed >= 0;  // dropped, as write_call drops
  PyObject* sequences = PyObject_GetAttr(writer, s_sequences);
  if (sequences != nullptr && !PyDict_Check(sequences)) {
    Py_DECREF(sequences);
    PyErr_SetString(PyExc_TypeError, "queue_call: the writer's sequences are not a dict");
    return false;
  }
  PyObject* sequence = sequences == nullptr ? nullptr : PyDict_GetItemWithError(sequences, s_execution_stream);
  PyObject* first = sequence == nullptr ? nullptr : PyObject_GetAttr(writer, s_next_trace);
  if (first == nullptr) {
    if (sequences != nullptr && !PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "_sequences['execution']");
    Py_XDECREF(sequences);
    return false;
  }
  Py_INCREF(sequence);  // held: the dict item is replaced below
  const long long start = PyLong_AsLongLong(first);
  const long long execution_sequence = PyLong_AsLongLong(sequence);
  if (PyErr_Occurred()) {
    Py_DECREF(first);
    Py_DECREF(sequence);
    Py_DECREF(sequences);
    return false;
  }
  PyObject* arguments[9] = {framing[0], framing[1], framing[2], framing[3], framing[4],
                            framing[5], framing[6], first,      sequence};
  PyObject* framed = FrameCall(nullptr, arguments, 9);
  Py_DECREF(first);
  if (framed == nullptr) {
    Py_DECREF(sequence);
    Py_DECREF(sequences);
    return false;
  }
  PyObject* record = PyTuple_GET_ITEM(framed, 0);
  PyObject* blob = PyTuple_GET_ITEM(framed, 1);
  PyObject* sizes = PyTuple_GET_ITEM(framed, 2);
  PyObject* streams = PyObject_GetAttr(writer, s_pending);
  PyObject* traces = streams == nullptr ? nullptr : PyDict_GetItemWithError(streams, s_traces_stream);
  PyObject* executions = traces == nullptr ? nullptr : PyDict_GetItemWithError(streams, s_execution_stream);
  PyObject* queued = PyObject_GetAttr(writer, s_pending_bytes);
  bool ok = executions != nullptr && queued != nullptr && PyList_Check(traces) && PyList_Check(executions);
  const Py_ssize_t count = PyList_GET_SIZE(sizes);
  if (ok && count) {
    // A run of records (writer._Framed's fields). Its sizes as a tuple: a tuple of ints, and
    // the run holding it (bytes and that tuple), can be in no reference cycle, so neither is
    // tracked by the collector: tracked, they would wait in its youngest generation until
    // its next pass (a list would stay tracked until the flush, ~13k calls a second in a
    // training loop, and its promotions would set off full collections).
    PyObject* frozen = PyList_AsTuple(sizes);
    PyObject* run = frozen == nullptr ? nullptr : PyTuple_Pack(2, blob, frozen);
    if (run != nullptr) {
      PyObject_GC_UnTrack(frozen);
      PyObject_GC_UnTrack(run);
    }
    ok = run != nullptr && PyList_Append(traces, run) == 0;
    Py_XDECREF(run);
    Py_XDECREF(frozen);
  }
  ok = ok && PyList_Append(executions, record) == 0;
  if (ok) {
    *pending = PyLong_AsLongLong(queued) + PyBytes_GET_SIZE(blob) + PyBytes_GET_SIZE(record);
    PyObject* next = PyLong_FromLongLong(start + count);
    PyObject* next_sequence = PyLong_FromLongLong(execution_sequence + 1);
    PyObject* total = PyLong_FromLongLong(*pending);
    ok = next != nullptr && next_sequence != nullptr && total != nullptr &&
         PyObject_SetAttr(writer, s_next_trace, next) == 0 &&
         PyDict_SetItem(sequences, s_execution_stream, next_sequence) == 0 &&
         PyObject_SetAttr(writer, s_pending_bytes, total) == 0;
    Py_XDECREF(next);
    Py_XDECREF(next_sequence);
    Py_XDECREF(total);
  } else if (!PyErr_Occurred()) {
    PyErr_SetString(PyExc_TypeError, "queue_call: the writer's pending queues are not lists");
  }
  // A call not known finite: counted (a NaN or an Inf: kept whole by the ring, if among the
  // first); a finite one costs nothing more.
  const int counted = !ok || nonfinite == Py_False ? 0 : nonfinite == Py_True ? 1 : Flag(writer, s_counts_health);
  if (counted < 0) ok = false;
  if (counted > 0) {
    PyObject* first_trace = PyLong_FromLongLong(start);
    PyObject* num_traces = first_trace == nullptr ? nullptr : PyLong_FromSsize_t(count);
    PyObject* done = num_traces == nullptr ? nullptr
                                           : PyObject_CallMethodObjArgs(writer, s_count_locked, sequence, first_trace,
                                                                        num_traces, nonfinite, nullptr);
    ok = done != nullptr;
    Py_XDECREF(done);
    Py_XDECREF(num_traces);
    Py_XDECREF(first_trace);
  }
  Py_DECREF(sequence);
  Py_DECREF(sequences);
  Py_XDECREF(queued);
  Py_XDECREF(streams);
  Py_DECREF(framed);
  return ok;
}

// queue_call(writer, wall_time, step, execution, statics, which, middle, tails, width, nonfinite)
//   -> None:
// DebugEventsWriter.write_call for the compiled path's call (its Execution, its traces as
// TraceParts' fields, whether they hold a NaN or an Inf: True, False or None for not known)
// in C++, for the Python writer and for native_call alike. It reads and updates, under
// writer._lock, what write_call does (_next_trace, _sequences' execution entry, _pending's
// execution and trace queues, _pending_bytes, and, for a call not known finite,
// _count_locked); does nothing once _failed or _closed; calls
// writer._eager_write(pending) from writer._eager_bytes pending; and, like write_call, never
// raises what framing raises: it goes to writer._fail.
PyObject* QueueCall(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!CheckArgs(nargs, 10, "queue_call")) return nullptr;
  PyObject* writer = args[0];
  const int failed = Flag(writer, s_failed);
  const int closed = failed == 0 ? Flag(writer, s_closed) : 0;
  if (failed < 0 || closed < 0) return nullptr;
  if (failed || closed) Py_RETURN_NONE;
  const double wall_time = PyFloat_AsDouble(args[1]);
  const unsigned long long step = PyLong_AsUnsignedLongLongMask(args[2]);
  if (PyErr_Occurred()) return nullptr;
  PyObject* key = PyObject_GetAttr(writer, s_run_key_field);
  if (key == nullptr) return nullptr;
  if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) > 16) {
    Py_DECREF(key);
    PyErr_SetString(PyExc_TypeError, "queue_call: the writer's run key field must be bytes");
    return nullptr;
  }
  // DebugEvent.wall_time (double), step (varint) if set, then run_key (writer._run_key_field).
  char prefix[48] = {1 << 3 | 1};
  std::memcpy(prefix + 1, &wall_time, 8);
  char* end = prefix + 9;
  if (step) {
    *end++ = 2 << 3;
    end = PutVarint(end, step);
  }
  end = PutSpan(end, {PyBytes_AS_STRING(key), static_cast<size_t>(PyBytes_GET_SIZE(key))});
  Py_DECREF(key);
  PyObject* envelope = PyBytes_FromStringAndSize(prefix, end - prefix);
  PyObject* lock = envelope == nullptr ? nullptr : PyObject_GetAttr(writer, s_lock);
  PyObject* held = lock == nullptr ? nullptr : PyObject_CallMethodNoArgs(lock, s_acquire);
  if (held == nullptr) {
    Py_XDECREF(lock);
    Py_XDECREF(envelope);
    return nullptr;
  }
  Py_DECREF(held);
  PyObject* framing[7] = {envelope, args[3], args[4], args[5], args[6], args[7], args[8]};
  long long pending = 0;
  const bool queued = QueueLocked(writer, framing, args[9], &pending);
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  if (!queued) PyErr_Fetch(&type, &value, &traceback);
  PyObject* released = PyObject_CallMethodNoArgs(lock, s_release);
  Py_DECREF(lock);
  Py_DECREF(envelope);
  if (released == nullptr) {
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return nullptr;
  }
  Py_DECREF(released);
  if (!queued) {
    PyErr_NormalizeException(&type, &value, &traceback);
    PyObject* message = PyUnicode_FromFormat("could not encode a call's records: %R", value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    PyObject* done = message == nullptr ? nullptr : PyObject_CallMethodOneArg(writer, s_fail, message);
    Py_XDECREF(message);
    if (done == nullptr) return nullptr;
    Py_DECREF(done);
    Py_RETURN_NONE;
  }
  PyObject* bound = PyObject_GetAttr(writer, s_eager_bytes);
  const long long eager = bound == nullptr ? -1 : PyLong_AsLongLong(bound);
  Py_XDECREF(bound);
  if (eager == -1 && PyErr_Occurred()) return nullptr;
  if (pending >= eager) {
    PyObject* count = PyLong_FromLongLong(pending);
    PyObject* done = count == nullptr ? nullptr : PyObject_CallMethodOneArg(writer, s_eager_write, count);
    Py_XDECREF(count);
    if (done == nullptr) return nullptr;
    Py_DECREF(done);
  }
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"frame_traces", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FrameTraces)), METH_FASTCALL,
     "frame_traces(prefix, payloads, first) -> (records, sizes)"},
    {"frame_trace_parts", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FrameTraceParts)),
     METH_FASTCALL, "frame_trace_parts(prefix, statics, which, middle, tails, width, first) -> (records, sizes)"},
    {"frame_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FrameCall)), METH_FASTCALL,
     "frame_call(envelope, execution, statics, which, middle, tails, width, first, sequence) -> (record, records, "
     "sizes)"},
    {"join_chunks", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(JoinChunks)), METH_FASTCALL,
     "join_chunks(chunks, start, ring) -> (data, ends as packed int64 or None)"},
    {"queue_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(QueueCall)), METH_FASTCALL,
     "queue_call(writer, wall_time, step, execution, statics, which, middle, tails, width, nonfinite) -> None"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "native_records", "TFRecord framing of trace batches.", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit_native_records() { return Intern() ? PyModule_Create(&kModule) : nullptr; }
