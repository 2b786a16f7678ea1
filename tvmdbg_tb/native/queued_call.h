// One compiled call's records as native_records queues them, shared by native_records.cc (its
// queue_call, from Python, and its C entry) and native_call.cc (which hands a call over through
// that C entry, the capsule native_records.QUEUE_CALL: no Python object is made for the call's
// Execution, its traces' parts or its wall time, and nothing is parsed back out of one).
#ifndef TVMDBG_NATIVE_QUEUED_CALL_H_
#define TVMDBG_NATIVE_QUEUED_CALL_H_

#include "python_buffer.h"

#include <cstdint>
#include <cstring>

namespace tvmdbg {

inline size_t VarintLength(uint64_t value) {
  size_t n = 1;
  for (; value >= 0x80; value >>= 7) ++n;
  return n;
}

inline char* PutVarint64(char* p, uint64_t value) {
  for (; value >= 0x80; value >>= 7) *p++ = static_cast<char>((value & 0x7F) | 0x80);
  *p++ = static_cast<char>(value);
  return p;
}

// The Execution's per-call fields, written after its constant ones: index (1), duration_us
// (7), code_location (8) and num_traces (9).
struct ExecutionFields {
  uint64_t index;
  double duration_us;
  Bytes location;
  uint64_t num_traces;
  uint64_t call_number;  // Execution.call_number (field 41)
};

inline size_t ExecutionFieldsSize(const ExecutionFields& fields) {
  return 1 + VarintLength(fields.index) + 1 + 8 + 1 + VarintLength(fields.location.size) + fields.location.size + 1 +
         VarintLength(fields.num_traces) + 2 + VarintLength(fields.call_number);
}

inline char* PutExecutionFields(char* p, const ExecutionFields& fields) {
  *p++ = 0x08;
  p = PutVarint64(p, fields.index);
  *p++ = 0x39;
  std::memcpy(p, &fields.duration_us, 8);
  p += 8;
  *p++ = 0x42;
  p = PutVarint64(p, fields.location.size);
  std::memcpy(p, fields.location.data, fields.location.size);
  p += fields.location.size;
  *p++ = 0x48;
  p = PutVarint64(p, fields.num_traces);
  *p++ = static_cast<char>(0xC8);  // field 41, varint: two bytes of tag
  *p++ = 0x02;
  return PutVarint64(p, fields.call_number);
}

// A call's records: its Execution (execution, then fields unless nullptr) and its traces
// (trace k: statics[which[k]] (which: u32 each), then middle, then bytes k * width to
// (k + 1) * width of tails), and whether they hold a NaN or an Inf (True, False, None: not known).
struct QueuedCall {
  double wall_time;
  uint64_t step;
  Bytes execution;
  const ExecutionFields* fields;
  PyObject* statics;  // a list of bytes
  Bytes which;
  Bytes middle;
  Bytes tails;
  long long width;
  PyObject* nonfinite;
};

// native_records' C entry: queues the call as queue_call(writer, ...) does; 0, or -1 with an
// exception set (what framing raises goes to the writer, as from queue_call).
using QueueCallFunction = int (*)(PyObject* writer, const QueuedCall& call);
constexpr const char kQueueCallCapsule[] = "tvmdbg_tb.native.native_records.QUEUE_CALL";

}  // namespace tvmdbg

#endif  // TVMDBG_NATIVE_QUEUED_CALL_H_
