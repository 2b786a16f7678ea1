// Trace records framed in C++ (see native_records.py): the writer's per-record work for a
// batch of serialized traces, in one call instead of a Python loop. A CPython extension:
// a call costs ~0.1 us, so even a call's handful of traces gains from it.
//
// Each record is what writer.py's Python path writes, byte for byte: the TFRecord framing
// (u64 length, its masked CRC32C, the data, the data's masked CRC32C) around a DebugEvent
// whose data is the envelope prefix, the trace field's length, the trace's serialized
// fields and its `index` (field 13, sfixed64).
#include "queued_call.h"

#include <structmember.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include <sys/mman.h>

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
  if (n & 4) {  // the rest in at most three steps, each waiting for the one before
    uint32_t word;
    std::memcpy(&word, p, 4);
    c = _mm_crc32_u32(c, word);
    p += 4;
  }
  if (n & 2) {
    uint16_t word;
    std::memcpy(&word, p, 2);
    c = _mm_crc32_u16(c, word);
    p += 2;
  }
  if (n & 1) c = _mm_crc32_u8(c, *p);
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
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  std::memcpy(p, &value, static_cast<size_t>(width));  // one store: the CRC reads it back at once
  return p + width;
#else
  for (int k = 0; k < width; ++k) *p++ = static_cast<char>((value >> (8 * k)) & 0xFF);
  return p;
#endif
}

using tvmdbg::PutVarint64;
using tvmdbg::VarintLength;
using Span = tvmdbg::Bytes;

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
  return kFraming + prefix.size + VarintLength(payload + 9) + payload + 9;
}

// Writes one trace record at out: its payload is the concatenation of parts (`payload`
// bytes), its index `index`; returns the record's end.
char* PutTraceRecord(char* out, Span prefix, const Span* parts, int num_parts, size_t payload, int64_t index) {
  char* p = PutSpan(out + 12, prefix);
  p = PutVarint64(p, payload + 9);
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

// One call's traces as frame_trace_parts takes them (statics, which, middle, tails, width):
// trace k's payload is statics[which[k]] (which: u32 each), then middle, then bytes
// k * width to (k + 1) * width of tails.
class Parts {
 public:
  // From Python arguments (statics, which, middle, tails, width), held while this lives; false
  // with an exception set when they do not fit together.
  bool Read(PyObject* const* args) {
    Span middle;
    if (!which_buffer_.Get(args[1], "which") || !GetBytes(args[2], "middle", &middle) ||
        !tails_buffer_.Get(args[3], "tails")) {
      return false;
    }
    const long long width = PyLong_AsLongLong(args[4]);
    if (width == -1 && PyErr_Occurred()) return false;
    return Set(args[0], {which_buffer_.data(), which_buffer_.size()}, middle,
               {tails_buffer_.data(), tails_buffer_.size()}, width);
  }
  // From memory the caller holds; false with an exception set when they do not fit together.
  bool Set(PyObject* statics, Span which, Span middle, Span tails, long long width) {
    if (!PyList_Check(statics)) {
      PyErr_SetString(PyExc_TypeError, "statics must be a list of bytes");
      return false;
    }
    statics_ = statics;
    which_ = which;
    middle_ = middle;
    tails_ = tails;
    count_ = which.size / 4;
    if (which.size % 4 != 0 || width < 0 || tails.size != count_ * static_cast<size_t>(width)) {
      PyErr_SetString(PyExc_ValueError, "frame_trace_parts: tails do not match the traces");
      return false;
    }
    width_ = static_cast<size_t>(width);
    return true;
  }
  size_t count() const { return count_; }
  // The size of their records, each data starting with prefix; false (an exception set) when a
  // static is out of range or not bytes.
  bool Size(Span prefix, size_t* total) const {
    *total = 0;
    for (size_t k = 0; k < count_; ++k) {
      Span head;
      if (!Static(k, &head)) return false;
      *total += TraceRecordSize(prefix, head.size + middle_.size + width_);
    }
    return true;
  }
  // Writes trace k's record (index `index`) at out, after Size succeeded; returns its end.
  char* Put(char* out, Span prefix, size_t k, long long index) const {
    Span head;
    Static(k, &head);  // checked by Size
    const Span parts[3] = {head, middle_, {tails_.data + k * width_, width_}};
    return PutTraceRecord(out, prefix, parts, 3, head.size + middle_.size + width_, index);
  }

 private:
  bool Static(size_t k, Span* out) const {
    uint32_t i;
    std::memcpy(&i, which_.data + 4 * k, 4);
    if (i >= static_cast<size_t>(PyList_GET_SIZE(statics_))) {
      PyErr_SetString(PyExc_ValueError, "frame_trace_parts: a static out of range");
      return false;
    }
    return GetBytes(PyList_GET_ITEM(statics_, i), "each static", out);
  }

  PyObject* statics_ = nullptr;
  Buffer which_buffer_, tails_buffer_;
  Span which_{}, middle_{}, tails_{};
  size_t width_ = 0, count_ = 0;
};

// frame_trace_parts(prefix, statics, which, middle, tails, width, first) -> (bytes, [int]):
// trace k's payload is statics[which[k]] (which: u32 each), then middle, then bytes
// k * width to (k + 1) * width of tails; its index first + k.
PyObject* FrameTraceParts(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!CheckArgs(nargs, 7, "frame_trace_parts")) return nullptr;
  Span prefix;
  Parts parts;
  size_t total = 0;
  if (!GetBytes(args[0], "prefix", &prefix) || !parts.Read(args + 1) || !parts.Size(prefix, &total)) return nullptr;
  const long long first = PyLong_AsLongLong(args[6]);
  if (first == -1 && PyErr_Occurred()) return nullptr;
  Records records(total, parts.count());
  if (!records.ok()) return nullptr;
  for (size_t k = 0; k < parts.count(); ++k) {
    if (!records.Ended(k, parts.Put(records.at(), prefix, k, first + static_cast<long long>(k)))) return nullptr;
  }
  return records.Result();
}

constexpr uint8_t kExecutionTag = 8 << 3 | 2;  // DebugEvent.execution
constexpr uint8_t kTraceTag = 9 << 3 | 2;      // DebugEvent.graph_execution_trace
constexpr uint8_t kSequenceTag = 13 << 3;      // DebugEvent.sequence, a varint

// A call's Execution: its serialized fields, then its per-call ones unless fields is nullptr.
struct Execution {
  Span head;
  const tvmdbg::ExecutionFields* fields;
  size_t size() const { return head.size + (fields != nullptr ? tvmdbg::ExecutionFieldsSize(*fields) : 0); }
};

// The size of a call's Execution record: writer.py's records.encode of the envelope, the
// execution field's tag and length, the Execution, and the record's sequence.
size_t ExecutionRecordSize(Span envelope, const Execution& execution, uint64_t sequence) {
  const size_t size = execution.size();
  return kFraming + envelope.size + 1 + VarintLength(size) + size + 1 + VarintLength(sequence);
}

char* PutExecutionRecord(char* out, Span envelope, const Execution& execution, uint64_t sequence) {
  char* p = PutSpan(out + 12, envelope);
  *p++ = static_cast<char>(kExecutionTag);
  p = PutSpan(PutVarint64(p, execution.size()), execution.head);
  if (execution.fields != nullptr) p = tvmdbg::PutExecutionFields(p, *execution.fields);
  *p++ = static_cast<char>(kSequenceTag);
  return Frame(out, PutVarint64(p, sequence));
}

uint64_t GetLe64(const char* p) {
  uint64_t value = 0;
  for (int k = 7; k >= 0; --k) value = value << 8 | static_cast<uint8_t>(p[k]);
  return value;
}

// Calls each(end) with the end of each record framed in data[0, size) (a record: its u64
// length, 4 bytes, the data, 4 bytes); false when the records do not fill it exactly.
template <class Each>
bool EachRecord(const char* data, size_t size, Each each) {
  size_t at = 0;
  while (at < size) {
    if (size - at < kFraming) return false;
    const uint64_t length = GetLe64(data + at);
    if (length > size - at - kFraming) return false;
    at += kFraming + length;
    each(at);
  }
  return true;
}

// -- Spool: one stream's queued records, end to end, in memory of their own ---------------------
//
// What queue_call queues waits about a second for the flush. As objects per call (bytes of
// a few hundred bytes to kilobytes: malloc blocks) they sat in glibc's heap between the traced
// program's own short-lived allocations and made the program's next code slower (TVM's
// kv_state_begin_forward after a traced decode step: 3.1-3.5 us against 1.0 untraced, 0.94
// with the records dropped). A spool appends each call's records to one buffer per stream, in
// an anonymous mapping (never the allocator's heap), grown in place by mremap. The mappings
// of spools the flush wrote are kept for the next ones, so their pages stay mapped. The GIL
// guards the kept mappings; the writer's lock guards a queued spool (queue_call appends only to
// the spool at the end of a stream's pending list, which the flush takes away under that lock).

struct Mapping {
  char* data;
  size_t size;
};

constexpr size_t kFirstMapping = size_t{1} << 20;
constexpr size_t kMaxKeptMapping = size_t{64} << 20;  // larger ones go back to the system
constexpr int kMaxKept = 4;
Mapping g_kept[kMaxKept];
int g_num_kept = 0;

// A mapping of at least `size` bytes (the largest kept one when it is large enough), its pages
// populated: a page faulted in while a call writes its records costs the call a trap each
// (~1 us here; FULL_HEALTH's records fill a page every ~2 calls of a small model), populated
// in bulk it costs their zeroing. data nullptr when the system has no memory.
Mapping TakeMapping(size_t size) {
  int largest = -1;
  for (int k = 0; k < g_num_kept; ++k) {
    if (g_kept[k].size >= size && (largest < 0 || g_kept[k].size > g_kept[largest].size)) largest = k;
  }
  if (largest >= 0) {
    const Mapping found = g_kept[largest];
    g_kept[largest] = g_kept[--g_num_kept];
    return found;
  }
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return {data == MAP_FAILED ? nullptr : static_cast<char*>(data), size};
}

void GiveMapping(Mapping mapping) {
  if (mapping.data == nullptr) return;
  if (mapping.size <= kMaxKeptMapping && g_num_kept < kMaxKept) {
    g_kept[g_num_kept++] = mapping;
  } else {
    munmap(mapping.data, mapping.size);
  }
}

struct SpoolObject {
  PyObject_HEAD Mapping mapping;
  size_t size;         // bytes of records
  Py_ssize_t exports;  // buffers handed out: the records neither move nor grow meanwhile
};

PyTypeObject kSpoolType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// Room for `extra` more bytes at the spool's end (the mapping grown or moved); false with an
// exception set.
bool Reserve(SpoolObject* spool, size_t extra) {
  const size_t need = spool->size + extra;
  if (need <= spool->mapping.size) return true;
  if (spool->exports > 0) {
    PyErr_SetString(PyExc_BufferError, "a spool cannot grow while its records are exported");
    return false;
  }
  size_t size = spool->mapping.size ? spool->mapping.size : kFirstMapping;
  while (size < need) size *= 2;
  if (spool->mapping.data == nullptr) {
    spool->mapping = TakeMapping(size);
    if (spool->mapping.data == nullptr) spool->mapping.size = 0;
  } else {
    const size_t old_size = spool->mapping.size;
    void* moved = mremap(spool->mapping.data, old_size, size, MREMAP_MAYMOVE);
    if (moved != MAP_FAILED) {
      spool->mapping = {static_cast<char*>(moved), size};
#ifdef MADV_POPULATE_WRITE
      madvise(spool->mapping.data + old_size, size - old_size, MADV_POPULATE_WRITE);  // else faulted in as written
#endif
    }
  }
  if (spool->mapping.size < need) {  // no memory: what is written stays
    PyErr_NoMemory();
    return false;
  }
  return true;
}

PyObject* NewSpool(PyTypeObject* type, PyObject*, PyObject*) {
  auto* spool = reinterpret_cast<SpoolObject*>(type->tp_alloc(type, 0));
  if (spool != nullptr) {
    spool->mapping = {nullptr, 0};
    spool->size = 0;
    spool->exports = 0;
  }
  return reinterpret_cast<PyObject*>(spool);
}

void SpoolDealloc(PyObject* self) {
  auto* spool = reinterpret_cast<SpoolObject*>(self);
  GiveMapping(spool->mapping);
  Py_TYPE(self)->tp_free(self);
}

int SpoolGetBuffer(PyObject* self, Py_buffer* view, int flags) {
  auto* spool = reinterpret_cast<SpoolObject*>(self);
  static char empty[1];
  char* data = spool->mapping.data != nullptr ? spool->mapping.data : empty;
  if (PyBuffer_FillInfo(view, self, data, static_cast<Py_ssize_t>(spool->size), 1, flags) != 0) return -1;
  ++spool->exports;
  return 0;
}

void SpoolReleaseBuffer(PyObject* self, Py_buffer*) { --reinterpret_cast<SpoolObject*>(self)->exports; }

// Appends data (whole records) to the spool; false with an exception set.
bool Append(SpoolObject* spool, const char* data, size_t size) {
  if (!Reserve(spool, size)) return false;
  std::memcpy(spool->mapping.data + spool->size, data, size);
  spool->size += size;
  return true;
}

// A chunk of a pending list: one record (bytes), a run of records ((bytes, sizes), sizes a
// list or a tuple of ints: their sum is checked against the bytes' size) or a spool.
struct Chunk {
  const char* data;
  size_t size;
  PyObject* sizes;  // a run's sizes; nullptr for a record or a spool
  bool spool;
};

bool ReadChunk(PyObject* chunk, Chunk* out) {
  if (PyBytes_Check(chunk)) {
    *out = {PyBytes_AS_STRING(chunk), static_cast<size_t>(PyBytes_GET_SIZE(chunk)), nullptr, false};
    return true;
  }
  if (Py_IS_TYPE(chunk, &kSpoolType)) {
    const auto* spool = reinterpret_cast<SpoolObject*>(chunk);
    *out = {spool->mapping.data, spool->size, nullptr, true};
    return true;
  }
  if (PyTuple_Check(chunk) && PyTuple_GET_SIZE(chunk) == 2 && PyBytes_Check(PyTuple_GET_ITEM(chunk, 0)) &&
      (PyList_Check(PyTuple_GET_ITEM(chunk, 1)) || PyTuple_Check(PyTuple_GET_ITEM(chunk, 1)))) {
    PyObject* blob = PyTuple_GET_ITEM(chunk, 0);
    *out = {PyBytes_AS_STRING(blob), static_cast<size_t>(PyBytes_GET_SIZE(blob)), PyTuple_GET_ITEM(chunk, 1), false};
    return true;
  }
  PyErr_SetString(PyExc_TypeError, "join_chunks: a chunk is bytes, a (bytes, sizes) run or a spool");
  return false;
}

// Calls each(size) for each record of the chunk; false with an exception set when a run's
// sizes are not ints or do not add up to its bytes, or a spool's records do not fill it.
template <class Each>
bool EachSize(const Chunk& chunk, Each each) {
  if (chunk.spool) {
    size_t last = 0;
    const bool whole = EachRecord(chunk.data, chunk.size, [&](size_t end) {
      each(end - last);
      last = end;
    });
    if (!whole) PyErr_SetString(PyExc_ValueError, "join_chunks: a spool's records do not fill it");
    return whole;
  }
  if (chunk.sizes == nullptr) {
    each(chunk.size);
    return true;
  }
  size_t total = 0;
  for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(chunk.sizes); ++j) {
    PyObject* size = PySequence_Fast_ITEMS(chunk.sizes)[j];
    const long long value = PyLong_Check(size) ? PyLong_AsLongLong(size) : -1;
    if (value < 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "join_chunks: a run's sizes must be ints");
      return false;
    }
    total += static_cast<size_t>(value);
    each(static_cast<size_t>(value));
  }
  if (total != chunk.size) PyErr_SetString(PyExc_ValueError, "join_chunks: a run's sizes do not add up to its bytes");
  return total == chunk.size;
}

// Spool.extend(chunks): appends records and runs of records (bytes, (bytes, sizes)) to the
// spool, as the writer's Python paths queue them once queue_call started a spool.
PyObject* SpoolExtend(PyObject* self, PyObject* chunks) {
  PyObject* items = PySequence_Fast(chunks, "Spool.extend takes a sequence of chunks");
  if (items == nullptr) return nullptr;
  bool ok = true;
  for (Py_ssize_t k = 0; ok && k < PySequence_Fast_GET_SIZE(items); ++k) {
    Chunk chunk;
    PyObject* item = PySequence_Fast_GET_ITEM(items, k);
    ok = ReadChunk(item, &chunk) && (!chunk.sizes || EachSize(chunk, [](size_t) {})) &&
         Append(reinterpret_cast<SpoolObject*>(self), chunk.data, chunk.size);
  }
  Py_DECREF(items);
  if (!ok) return nullptr;
  Py_RETURN_NONE;
}

// Spool.sizes() -> tuple of each record's size (read from the records' framing).
PyObject* SpoolSizes(PyObject* self, PyObject*) {
  const auto* spool = reinterpret_cast<SpoolObject*>(self);
  PyObject* sizes = PyList_New(0);
  if (sizes == nullptr) return nullptr;
  bool appended = true;
  const bool whole = EachSize({spool->mapping.data, spool->size, nullptr, true}, [&](size_t size) {
    PyObject* value = appended ? PyLong_FromSize_t(size) : nullptr;
    appended = value != nullptr && PyList_Append(sizes, value) == 0;
    Py_XDECREF(value);
  });
  PyObject* tuple = whole && appended ? PyList_AsTuple(sizes) : nullptr;
  Py_DECREF(sizes);
  return tuple;
}

PyMethodDef kSpoolMethods[] = {
    {"extend", SpoolExtend, METH_O, "extend(chunks): appends records (bytes) and runs ((bytes, sizes))"},
    {"sizes", SpoolSizes, METH_NOARGS, "sizes() -> each record's size"},
    {nullptr, nullptr, 0, nullptr},
};

PyBufferProcs kSpoolBuffer = {SpoolGetBuffer, SpoolReleaseBuffer};

bool ReadySpoolType() {
  kSpoolType.tp_name = "native_records.Spool";
  kSpoolType.tp_basicsize = sizeof(SpoolObject);
  kSpoolType.tp_flags = Py_TPFLAGS_DEFAULT;  // holds no objects: never tracked by the collector
  kSpoolType.tp_doc = "Spool(): a stream's queued records end to end, in memory outside the allocator's heap";
  kSpoolType.tp_new = NewSpool;
  kSpoolType.tp_dealloc = SpoolDealloc;
  kSpoolType.tp_as_buffer = &kSpoolBuffer;
  kSpoolType.tp_methods = kSpoolMethods;
  return PyType_Ready(&kSpoolType) == 0;
}

// join_chunks(chunks, start, ring) -> (data, ends): the writer's flush of one stream. data:
// the chunks' bytes end to end (chunks as ReadChunk takes them; one spool alone: a memoryview
// of it, not a copy); ends: with ring, where each record ends in the file (start: the file's
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
  size_t total = 0, records = 0;
  bool ok = !(start == -1 && PyErr_Occurred()) && ring >= 0;
  for (Py_ssize_t k = 0; ok && k < count; ++k) {
    Chunk chunk;
    ok = ReadChunk(items[k], &chunk) && EachSize(chunk, [&](size_t) { ++records; });
    total += chunk.size;
  }
  const bool alone = ok && count == 1 && Py_IS_TYPE(items[0], &kSpoolType);
  PyObject* data = !ok ? nullptr
                   : alone ? PyMemoryView_FromObject(items[0])
                           : PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(total));
  PyObject* ends = data != nullptr && ring ? PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(records * 8)) : nullptr;
  if (data == nullptr || (ring && ends == nullptr)) {
    Py_XDECREF(data);
    Py_DECREF(chunks);
    return nullptr;
  }
  char* out = alone ? nullptr : PyBytes_AS_STRING(data);
  char* end_out = ends != nullptr ? PyBytes_AS_STRING(ends) : nullptr;
  long long end = start;
  for (Py_ssize_t k = 0; k < count; ++k) {
    Chunk chunk;
    ReadChunk(items[k], &chunk);  // read above
    if (out != nullptr) out = PutSpan(out, {chunk.data, chunk.size});
    if (end_out == nullptr) continue;
    EachSize(chunk, [&](size_t size) {  // checked above
      end += static_cast<long long>(size);
      std::memcpy(end_out, &end, 8);
      end_out += 8;
    });
  }
  Py_DECREF(chunks);
  PyObject* pair[2] = {data, ends != nullptr ? ends : Py_None};
  if (ends == nullptr) Py_INCREF(Py_None);
  return TupleOf(pair, 2);
}

// -- queue_call: DebugEventsWriter.write_call's work for a compiled call ----------------------------

PyObject* s_failed;
PyObject* s_closed;
PyObject* s_acquire;
PyObject* s_release;
PyObject* s_tally;
PyObject* s_next_trace_field;
PyObject* s_execution_sequence_field;
PyObject* s_pending_bytes_field;
PyObject* s_pending;
PyObject* s_eager_write;
PyObject* s_fail;
PyObject* s_traces_stream;
PyObject* s_execution_stream;
PyObject* s_count_locked;
PyObject* s_lock_setting;
PyObject* s_run_key_setting;
PyObject* s_eager_setting;
PyObject* s_counts_health_setting;

bool Intern() {
  const tvmdbg::InternedName names[] = {
      {&s_failed, "_failed"},
      {&s_closed, "_closed"},
      {&s_acquire, "acquire"},
      {&s_release, "release"},
      {&s_tally, "_tally"},
      {&s_next_trace_field, "next_trace"},
      {&s_execution_sequence_field, "execution_sequence"},
      {&s_pending_bytes_field, "pending_bytes"},
      {&s_pending, "_pending"},
      {&s_eager_write, "_eager_write"},
      {&s_fail, "_fail"},
      {&s_traces_stream, "graph_execution_traces"},  // layout.GRAPH_EXECUTION_TRACES
      {&s_execution_stream, "execution"},            // layout.EXECUTION
      {&s_count_locked, "_count_locked"},
      {&s_lock_setting, "lock"},
      {&s_run_key_setting, "run_key_field"},
      {&s_eager_setting, "eager_bytes"},
      {&s_counts_health_setting, "counts_health"},
  };
  return tvmdbg::InternAll(names);
}

// -- Tally: the writer's counters that every call advances -----------------------------------
//
// DebugEventsWriter._tally: the next trace index, the execution file's next sequence and the
// bytes pending, as C fields that queue_call reads and advances under the writer's lock without
// a Python attribute round trip each (the writer's Python paths use them as attributes;
// before the library is loaded the writer keeps them in a Python object of the same fields,
// which queue_call reads by attribute). With them, the writer's settings that queue_call reads
// on every call (constants of a writer, carried from tally to tally): its lock, its run key
// field, the pending bytes that wake its flushing thread and whether it counts calls' health.

struct Counts {
  long long next_trace;
  long long execution_sequence;
  long long pending_bytes;
};

struct TallyObject {
  PyObject_HEAD Counts counts;
  PyObject* lock;
  PyObject* run_key_field;
  long long eager_bytes;
  char counts_health;
};

PyMemberDef kTallyMembers[] = {
    {"next_trace", T_LONGLONG, offsetof(TallyObject, counts.next_trace), 0, "the next trace's index"},
    {"execution_sequence", T_LONGLONG, offsetof(TallyObject, counts.execution_sequence), 0,
     "the execution file's next sequence"},
    {"pending_bytes", T_LONGLONG, offsetof(TallyObject, counts.pending_bytes), 0, "bytes queued, not yet written"},
    {"lock", T_OBJECT, offsetof(TallyObject, lock), 0, "the writer's lock"},
    {"run_key_field", T_OBJECT, offsetof(TallyObject, run_key_field), 0, "the run key field of every record"},
    {"eager_bytes", T_LONGLONG, offsetof(TallyObject, eager_bytes), 0, "pending bytes that wake the flushing thread"},
    {"counts_health", T_BOOL, offsetof(TallyObject, counts_health), 0, "whether calls' health is counted"},
    {nullptr, 0, 0, 0, nullptr},
};

PyTypeObject kTallyType = {PyVarObject_HEAD_INIT(nullptr, 0)};

void TallyDealloc(PyObject* self) {
  auto* tally = reinterpret_cast<TallyObject*>(self);
  Py_XDECREF(tally->lock);
  Py_XDECREF(tally->run_key_field);
  Py_TYPE(self)->tp_free(self);
}

bool ReadyTallyType() {
  kTallyType.tp_name = "native_records.Tally";
  kTallyType.tp_basicsize = sizeof(TallyObject);
  kTallyType.tp_flags = Py_TPFLAGS_DEFAULT;
  kTallyType.tp_doc = "Tally(): a writer's next trace index, next execution sequence and pending bytes";
  kTallyType.tp_new = PyType_GenericNew;  // zeroed
  kTallyType.tp_dealloc = TallyDealloc;  // holds a lock and bytes: no cycle, never tracked by the collector
  kTallyType.tp_members = kTallyMembers;
  return PyType_Ready(&kTallyType) == 0;
}

const std::pair<PyObject**, long long Counts::*> kCountFields[] = {
    {&s_next_trace_field, &Counts::next_trace},
    {&s_execution_sequence_field, &Counts::execution_sequence},
    {&s_pending_bytes_field, &Counts::pending_bytes},
};

// The tally's counts (a Tally's fields, or any object's attributes of those names).
bool ReadCounts(PyObject* tally, Counts* counts) {
  if (Py_IS_TYPE(tally, &kTallyType)) {
    *counts = reinterpret_cast<TallyObject*>(tally)->counts;
    return true;
  }
  for (const auto& [name, field] : kCountFields) {
    PyObject* value = PyObject_GetAttr(tally, *name);
    counts->*field = value == nullptr ? -1 : PyLong_AsLongLong(value);
    Py_XDECREF(value);
    if (PyErr_Occurred()) return false;
  }
  return true;
}

bool WriteCounts(PyObject* tally, const Counts& counts) {
  if (Py_IS_TYPE(tally, &kTallyType)) {
    reinterpret_cast<TallyObject*>(tally)->counts = counts;
    return true;
  }
  for (const auto& [name, field] : kCountFields) {
    PyObject* value = PyLong_FromLongLong(counts.*field);
    const bool set = value != nullptr && PyObject_SetAttr(tally, *name, value) == 0;
    Py_XDECREF(value);
    if (!set) return false;
  }
  return true;
}

// The writer's settings its tally carries (new references; see Tally).
struct Settings {
  PyObject* lock = nullptr;
  PyObject* run_key_field = nullptr;
  long long eager_bytes = 0;
  int counts_health = 0;

  Settings() = default;
  Settings(const Settings&) = delete;
  Settings& operator=(const Settings&) = delete;
  ~Settings() {
    Py_XDECREF(lock);
    Py_XDECREF(run_key_field);
  }
  // Read from a Tally's fields, or any object's attributes of those names; false with an
  // exception set.
  bool Read(PyObject* tally) {
    if (Py_IS_TYPE(tally, &kTallyType)) {
      const auto* fields = reinterpret_cast<TallyObject*>(tally);
      lock = Py_XNewRef(fields->lock);
      run_key_field = Py_XNewRef(fields->run_key_field);
      eager_bytes = fields->eager_bytes;
      counts_health = fields->counts_health;
    } else {
      lock = PyObject_GetAttr(tally, s_lock_setting);
      run_key_field = lock ? PyObject_GetAttr(tally, s_run_key_setting) : nullptr;
      PyObject* eager = run_key_field ? PyObject_GetAttr(tally, s_eager_setting) : nullptr;
      eager_bytes = eager ? PyLong_AsLongLong(eager) : -1;
      Py_XDECREF(eager);
      PyObject* health = eager ? PyObject_GetAttr(tally, s_counts_health_setting) : nullptr;
      counts_health = health ? PyObject_IsTrue(health) : -1;
      Py_XDECREF(health);
      if (PyErr_Occurred()) return false;
    }
    if (lock == nullptr || run_key_field == nullptr || !PyBytes_Check(run_key_field) ||
        PyBytes_GET_SIZE(run_key_field) > 16) {
      PyErr_SetString(PyExc_TypeError, "queue_call: the writer's tally has no lock or run key field (bytes)");
      return false;
    }
    return true;
  }
};

// 1 when writer.<name> is true, 0 when false, -1 on error.
int Flag(PyObject* writer, PyObject* name) {
  PyObject* value = PyObject_GetAttr(writer, name);
  const int truth = value == nullptr ? -1 : PyObject_IsTrue(value);
  Py_XDECREF(value);
  return truth;
}

// The spool at the end of pending[stream] (a list), a new one appended there when the end is
// anything else (records the Python paths queued, or a spool being written); borrowed.
SpoolObject* TailSpool(PyObject* pending, PyObject* stream) {
  PyObject* queue = PyDict_GetItemWithError(pending, stream);
  if (queue == nullptr || !PyList_Check(queue)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "queue_call: the writer's pending queues are not lists");
    return nullptr;
  }
  const Py_ssize_t n = PyList_GET_SIZE(queue);
  PyObject* tail = n ? PyList_GET_ITEM(queue, n - 1) : nullptr;
  if (tail != nullptr && Py_IS_TYPE(tail, &kSpoolType) && reinterpret_cast<SpoolObject*>(tail)->exports == 0) {
    return reinterpret_cast<SpoolObject*>(tail);
  }
  PyObject* spool = NewSpool(&kSpoolType, nullptr, nullptr);
  const bool added = spool != nullptr && PyList_Append(queue, spool) == 0;
  Py_XDECREF(spool);  // the list holds it
  return added ? reinterpret_cast<SpoolObject*>(spool) : nullptr;
}

// One call's records as queue_call takes them, read before the writer's lock.
struct Call {
  Span envelope;
  Execution execution;
  const Parts& parts;
};

// Writes the call's records at the ends of the writer's execution and trace spools, its
// traces numbered from `first`, its Execution sequence `sequence`; their size in *size.
bool Spool(PyObject* writer, const Call& call, long long first, long long sequence, size_t* size) {
  char prefix[64];
  if (call.envelope.size >= sizeof(prefix)) {
    PyErr_SetString(PyExc_ValueError, "queue_call: the envelope is too long");
    return false;
  }
  std::memcpy(prefix, call.envelope.data, call.envelope.size);
  prefix[call.envelope.size] = static_cast<char>(kTraceTag);
  const Span trace_prefix = {prefix, call.envelope.size + 1};
  size_t traces_size = 0;
  if (!call.parts.Size(trace_prefix, &traces_size)) return false;
  const size_t execution_size = ExecutionRecordSize(call.envelope, call.execution, static_cast<uint64_t>(sequence));
  PyObject* pending = PyObject_GetAttr(writer, s_pending);
  if (pending == nullptr) return false;
  bool ok = PyDict_Check(pending);
  if (!ok) PyErr_SetString(PyExc_TypeError, "queue_call: the writer's _pending is not a dict");
  SpoolObject* traces = ok && call.parts.count() ? TailSpool(pending, s_traces_stream) : nullptr;
  ok = ok && (traces != nullptr || !call.parts.count());
  SpoolObject* executions = ok ? TailSpool(pending, s_execution_stream) : nullptr;
  ok = executions != nullptr && (traces == nullptr || Reserve(traces, traces_size)) && Reserve(executions, execution_size);
  if (ok && traces != nullptr) {
    char* out = traces->mapping.data + traces->size;
    for (size_t k = 0; k < call.parts.count(); ++k) out = call.parts.Put(out, trace_prefix, k, first + static_cast<long long>(k));
    traces->size += traces_size;
  }
  if (ok) {
    PutExecutionRecord(executions->mapping.data + executions->size, call.envelope, call.execution, static_cast<uint64_t>(sequence));
    executions->size += execution_size;
  }
  Py_XDECREF(pending);
  *size = traces_size + execution_size;
  return ok;
}

// Under writer._lock: the call's records spooled with the next trace index and execution
// sequence, the tally's counts advanced, and, unless it is known finite, its health counted
// (writer._count_locked); the pending byte count in *pending. False with an exception set.
// read: writer._tally as read before the lock.
bool QueueLocked(PyObject* writer, PyObject* read, bool counts_health, const Call& call, PyObject* nonfinite,
                 long long* pending) {
  // Checked under the lock: close() may have taken the last batch after the caller's check.
  const int failed = Flag(writer, s_failed);
  const int closed = failed == 0 ? Flag(writer, s_closed) : 0;
  if (failed || closed) return failed >= 0 && closed >= 0;  // dropped, as write_call drops
  // A native Tally is the writer's for good; a Python one may have been replaced meanwhile
  // (by the first flush after the library loaded).
  PyObject* tally = Py_IS_TYPE(read, &kTallyType) ? Py_NewRef(read) : PyObject_GetAttr(writer, s_tally);
  Counts counts;
  bool ok = tally != nullptr && ReadCounts(tally, &counts);
  const Counts before = counts;
  const long long count = static_cast<long long>(call.parts.count());
  size_t size = 0;
  ok = ok && Spool(writer, call, before.next_trace, before.execution_sequence, &size);
  if (ok) {
    counts.next_trace += count;
    counts.execution_sequence += 1;
    counts.pending_bytes += static_cast<long long>(size);
    *pending = counts.pending_bytes;
    ok = WriteCounts(tally, counts);
  }
  Py_XDECREF(tally);
  // A call not known finite: counted (a NaN or an Inf: kept whole by the ring, if among the
  // first); a finite one costs nothing more.
  const int counted = !ok || nonfinite == Py_False ? 0 : nonfinite == Py_True ? 1 : counts_health;
  if (counted > 0) {
    PyObject* sequence = PyLong_FromLongLong(before.execution_sequence);
    PyObject* first_trace = sequence == nullptr ? nullptr : PyLong_FromLongLong(before.next_trace);
    PyObject* num_traces = first_trace == nullptr ? nullptr : PyLong_FromLongLong(count);
    PyObject* done = num_traces == nullptr ? nullptr
                                           : PyObject_CallMethodObjArgs(writer, s_count_locked, sequence, first_trace,
                                                                        num_traces, nonfinite, nullptr);
    ok = done != nullptr;
    Py_XDECREF(done);
    Py_XDECREF(num_traces);
    Py_XDECREF(first_trace);
    Py_XDECREF(sequence);
  }
  return ok;
}

// Queues the call under the writer's lock (QueueLocked; tally: writer._tally, settings: its
// settings); false with the exception set.
bool QueueUnderLock(PyObject* writer, PyObject* tally, const Settings& settings, const Call& call,
                    PyObject* nonfinite, long long* pending) {
  PyObject* held = PyObject_CallMethodNoArgs(settings.lock, s_acquire);
  if (held == nullptr) return false;
  Py_DECREF(held);
  const bool queued = QueueLocked(writer, tally, settings.counts_health, call, nonfinite, pending);
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  if (!queued) PyErr_Fetch(&type, &value, &traceback);
  PyObject* released = PyObject_CallMethodNoArgs(settings.lock, s_release);
  if (released == nullptr) {  // this error wins
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return false;
  }
  Py_DECREF(released);
  if (!queued) PyErr_Restore(type, value, traceback);
  return queued;
}

// The writer failed with why the call could not be queued (the exception set); nullptr when
// that raised too.
PyObject* FailWriter(PyObject* writer) {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
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

// The writer failed with why a call could not be queued (FailWriter): 0, or -1 with an
// exception set when that raised too.
int Failed(PyObject* writer) {
  PyObject* done = FailWriter(writer);
  Py_XDECREF(done);
  return done != nullptr ? 0 : -1;
}

// queue_call's work (below) for a call given as memory, its traces as parts: 0, or -1 with an
// exception set.
int Queue(PyObject* writer, const tvmdbg::QueuedCall& queued, const Parts& parts) {
  PyObject* tally = PyObject_GetAttr(writer, s_tally);
  Settings settings;
  if (tally == nullptr || !settings.Read(tally)) {
    Py_XDECREF(tally);
    return -1;
  }
  // DebugEvent.wall_time (double), step (varint) if set, then run_key (the run key field).
  char prefix[48] = {1 << 3 | 1};
  std::memcpy(prefix + 1, &queued.wall_time, 8);
  char* end = prefix + 9;
  if (queued.step) {
    *end++ = 2 << 3;
    end = PutVarint64(end, queued.step);
  }
  PyObject* key = settings.run_key_field;
  end = PutSpan(end, {PyBytes_AS_STRING(key), static_cast<size_t>(PyBytes_GET_SIZE(key))});
  const Call call{{prefix, static_cast<size_t>(end - prefix)}, {queued.execution, queued.fields}, parts};
  long long pending = 0;
  const bool ok = QueueUnderLock(writer, tally, settings, call, queued.nonfinite, &pending);
  Py_DECREF(tally);
  if (!ok) return Failed(writer);
  if (pending >= settings.eager_bytes) {
    PyObject* count = PyLong_FromLongLong(pending);
    PyObject* done = count == nullptr ? nullptr : PyObject_CallMethodOneArg(writer, s_eager_write, count);
    Py_XDECREF(count);
    if (done == nullptr) return -1;
    Py_DECREF(done);
  }
  return 0;
}

// queue_call(writer, wall_time, step, execution, statics, which, middle, tails, width, nonfinite)
//   -> None:
// DebugEventsWriter.write_call for the compiled path's call (its Execution, its traces as
// TraceParts' fields, whether they hold a NaN or an Inf: True, False or None for not known)
// in C++, for the Python writer and for native_call alike. It reads and updates, under
// the writer's lock, what write_call does (_tally's counts, _pending's execution and trace
// queues: the records go to the spool at each one's end, and, for a call not known finite,
// _count_locked); does nothing once _failed or _closed; reads the writer's settings from its
// tally (Tally); calls writer._eager_write(pending) from the eager bound's pending bytes; and,
// like write_call, never raises what framing raises: it goes to writer._fail.
PyObject* QueueCall(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!CheckArgs(nargs, 10, "queue_call")) return nullptr;
  PyObject* writer = args[0];  // its _failed and _closed are read under its lock
  tvmdbg::QueuedCall call{};
  call.wall_time = PyFloat_AsDouble(args[1]);
  call.step = PyLong_AsUnsignedLongLongMask(args[2]);
  if (PyErr_Occurred()) return nullptr;
  call.nonfinite = args[9];
  Parts parts;  // holds the arguments' buffers
  if (!GetBytes(args[3], "execution", &call.execution) || !parts.Read(args + 4)) return FailWriter(writer);
  return Queue(writer, call, parts) == 0 ? Py_NewRef(Py_None) : nullptr;
}

// The C entry (capsule QUEUE_CALL): queue_call for native_call, the call's parts as memory.
int QueueFromC(PyObject* writer, const tvmdbg::QueuedCall& call) {
  Parts parts;
  if (!parts.Set(call.statics, call.which, call.middle, call.tails, call.width)) return Failed(writer);
  return Queue(writer, call, parts);
}

PyMethodDef kMethods[] = {
    {"frame_traces", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FrameTraces)), METH_FASTCALL,
     "frame_traces(prefix, payloads, first) -> (records, sizes)"},
    {"frame_trace_parts", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FrameTraceParts)),
     METH_FASTCALL, "frame_trace_parts(prefix, statics, which, middle, tails, width, first) -> (records, sizes)"},
    {"join_chunks", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(JoinChunks)), METH_FASTCALL,
     "join_chunks(chunks, start, ring) -> (data, ends as packed int64 or None)"},
    {"queue_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(QueueCall)), METH_FASTCALL,
     "queue_call(writer, wall_time, step, execution, statics, which, middle, tails, width, nonfinite) -> None"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "native_records", "TFRecord framing of trace batches.", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit_native_records() {
  if (!Intern() || !ReadySpoolType() || !ReadyTallyType()) return nullptr;
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  PyObject* entry = PyCapsule_New(reinterpret_cast<void*>(&QueueFromC), tvmdbg::kQueueCallCapsule, nullptr);
  if (entry == nullptr || PyModule_AddObject(module, "QUEUE_CALL", entry) != 0) {
    Py_XDECREF(entry);
    Py_CLEAR(module);
  }
  for (auto [name, type] : {std::pair{"Spool", &kSpoolType}, std::pair{"Tally", &kTallyType}}) {
    Py_INCREF(type);
    if (module != nullptr && PyModule_AddObject(module, name, reinterpret_cast<PyObject*>(type)) != 0) {
      Py_DECREF(type);
      Py_CLEAR(module);
    }
  }
  return module;
}
