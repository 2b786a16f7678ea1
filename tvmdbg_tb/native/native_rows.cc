// A compiled function's stats rows turned into record bytes, in C++ (see native_rows.py):
// each kernel's trace tail (debug_values and duration_us), the health-mode Execution's
// summaries, and the first non-finite row, for one call in one CPython call each, without
// numpy's fixed cost per operation. The bytes are fast_tracer's Python loops', double for
// double (no contraction; counts are whole numbers, so sums are exact in any order).
#include "python_buffer.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using tvmdbg::Buffer;
using tvmdbg::RecycledBytes;

// The stats buffer's bytes: call_rows reads its block's buffer once for its passes (a numpy
// array's buffer export costs ~50 ns each time).
struct Rows {
  char* data;
  size_t size;
};

// The bytes are written through a cursor into the result's own bytes, sized first: no
// growing string (an out-of-line append per double, ~110 a FULL_HEALTH call of 10 kernels)
// and no copy of it into the bytes object.
char* PutDouble(char* out, double value) {
  std::memcpy(out, &value, 8);  // little-endian hosts only (the fast path is x86-64)
  return out + 8;
}

double At(const char* base, size_t index) {
  double value;
  std::memcpy(&value, base + 8 * index, 8);
  return value;
}

// Column 1..7 of a row: size, lt0, gt0, eq0, -inf, +inf, rank (kernel_source's layout).
struct Counts {
  double size = 0, lt = 0, gt = 0, eq = 0, neg_inf = 0, pos_inf = 0, rank = 0;
  void Add(const char* row) {
    size += At(row, 1), lt += At(row, 2), gt += At(row, 3), eq += At(row, 4);
    neg_inf += At(row, 5), pos_inf += At(row, 6), rank += At(row, 7);
  }
  double Nan() const { return size - lt - gt - eq; }
  bool Nonfinite() const { return neg_inf != 0.0 || pos_inf != 0.0 || size != lt + gt + eq; }
};

// The inner-op check (kernel_source's layout, inner_check.py): a fused kernel's row holds in
// kInnerColumn the NaN and infinities its ops made inside it; row 0 holds in
// kInnerFlagColumn the call's start stamp (its column 0) when any kernel's ops made one.
constexpr long long kInnerColumn = 21;
constexpr long long kInnerFlagColumn = 1;

// Whether a kernel's fused ops made a NaN or an infinity in this call (row 0's flag).
bool InnerFlagged(const char* block, long long width) {
  return width > kInnerColumn && At(block, 0) != 0.0 && At(block, kInnerFlagColumn) == At(block, 0);
}

// The first kernel row (0-based) that ran, whose ops made a NaN or an infinity and whose
// output's counts are finite: the value is hidden inside the kernel (Python records it, with
// the ops; a kernel whose output shows it is an alert of its own); -1 if none. (A row
// without counts reads as finite.)
long long FirstMasked(const char* block, long long rows, long long width) {
  for (long long r = 1; r < rows; ++r) {
    const char* row = block + 8 * r * width;
    if (At(row, 0) == 0.0 || !(At(row, kInnerColumn) > 0.0)) continue;
    Counts counts;
    counts.Add(row);
    if (!counts.Nonfinite()) return r - 1;
  }
  return -1;
}

// The debug values of counts in a mode of `count` values (1, 4 or 10; see Tails), written
// at out; returns their end. One store per value: a loop over an initializer list was
// compiled into a copy through the stack whose 16-byte loads straddled its 8-byte stores
// (a store-forwarding stall per pair: most of a FULL_HEALTH call's trace tails).
char* PutValues(char* out, const Counts& c, long long count, double code, double rank) {
  const double nan = c.Nan();
  if (count == 1) {
    return PutDouble(out, c.neg_inf + c.pos_inf + nan > 0 ? 1.0 : 0.0);
  }
  if (count == 4) {
    out = PutDouble(out, c.size);
    out = PutDouble(out, c.neg_inf);
    out = PutDouble(out, c.pos_inf);
    return PutDouble(out, nan);
  }
  out = PutDouble(out, 0.0);
  out = PutDouble(out, code);
  out = PutDouble(out, rank);
  out = PutDouble(out, c.size);
  out = PutDouble(out, c.neg_inf);
  out = PutDouble(out, c.pos_inf);
  out = PutDouble(out, nan);
  out = PutDouble(out, c.lt - c.neg_inf);
  out = PutDouble(out, c.eq);
  return PutDouble(out, c.gt - c.pos_inf);
}

// trace_tails(block, rows, row_width, traced, count, codes, stats_column, rate) -> (which, tails)
//   block: the stats buffer (float64, row-major, row_width columns); rows 1..rows-1 are
//     kernel rows (row 0: the call's start), a row ran when its column 0 (cycles) is set;
//   traced: one byte per kernel row, nonzero when the row has a trace;
//   count: debug values per trace: 0 (duration only), 1 CURT, 4 CONCISE, 10 FULL_HEALTH,
//     15 FULL_STATS (the 10 plus columns stats_column..+4); codes: a float64 dtype code
//     per kernel row (FULL_HEALTH, FULL_STATS);
// returns each traced row that ran (u32 row - 1 each) and its tail, end to end. *nonfinite
// (when given): set when a traced row's counts hold a NaN or an Inf.
// (args[0], the block, is read as `block`.)
PyObject* Tails(const Rows& block, PyObject* const* args, Py_ssize_t nargs, bool* nonfinite) {
  if (nargs != 8) {
    PyErr_Format(PyExc_TypeError, "trace_tails takes 8 arguments (%zd given)", nargs);
    return nullptr;
  }
  Buffer traced, codes;
  if (!traced.Get(args[3], "traced") || !codes.Get(args[5], "codes")) return nullptr;
  const long long rows = PyLong_AsLongLong(args[1]);
  const long long width = PyLong_AsLongLong(args[2]);
  const long long count = PyLong_AsLongLong(args[4]);
  const long long stats = PyLong_AsLongLong(args[6]);
  const double rate = PyFloat_AsDouble(args[7]);
  if (PyErr_Occurred()) return nullptr;
  const bool health = count == 1 || count == 4 || count == 10 || count == 15;
  if (rows < 1 || width < 8 || (count != 0 && !health) || block.size < static_cast<size_t>(rows * width) * 8 ||
      traced.size() < static_cast<size_t>(rows - 1) ||
      (count >= 10 && codes.size() < static_cast<size_t>(rows - 1) * 8) || (count == 15 && stats + 5 > width)) {
    PyErr_SetString(PyExc_ValueError, "trace_tails: the arguments do not describe the stats rows");
    return nullptr;
  }
  const char* base = block.data;
  const size_t tail_size = count ? 2 + 8 * count + 9 : 9;
  // Written here first, then copied into bytes of their exact size (RecycledBytes).
  thread_local std::vector<char> which_scratch, tail_scratch;
  which_scratch.resize(static_cast<size_t>(4 * (rows - 1)));
  tail_scratch.resize(tail_size * static_cast<size_t>(rows - 1));
  char* which = which_scratch.data();
  char* tails = tail_scratch.data();
  double previous = At(base, 0);
  for (long long r = 1; r < rows; ++r) {
    const char* row = base + 8 * r * width;
    const double cycles = At(row, 0);
    if (cycles == 0.0) continue;  // did not run
    const double duration = (cycles - previous) / rate;
    previous = cycles;
    if (!traced.data()[r - 1]) continue;
    const uint32_t k = static_cast<uint32_t>(r - 1);
    std::memcpy(which, &k, 4);
    which += 4;
    if (count) {
      Counts counts;
      counts.Add(row);
      if (nonfinite != nullptr && counts.Nonfinite()) *nonfinite = true;
      *tails++ = 0x42;  // debug_values, packed
      *tails++ = static_cast<char>(8 * count);
      const double code = count >= 10 ? At(codes.data(), r - 1) : 0.0;
      tails = PutValues(tails, counts, count > 10 ? 10 : count, code, counts.rank);
      if (count == 15) {
        for (long long c = 0; c < 5; ++c) tails = PutDouble(tails, At(row, stats + c));
      }
    }
    *tails++ = 0x59;  // duration_us, a double
    tails = PutDouble(tails, duration);
  }
  PyObject* which_bytes = RecycledBytes(which_scratch.data(), which - which_scratch.data());
  PyObject* tail_bytes = which_bytes == nullptr ? nullptr : RecycledBytes(tail_scratch.data(), tails - tail_scratch.data());
  if (tail_bytes == nullptr) {
    Py_XDECREF(which_bytes);
    return nullptr;
  }
  PyObject* out = PyTuple_New(2);
  if (out == nullptr) {
    Py_DECREF(which_bytes);
    Py_DECREF(tail_bytes);
    return nullptr;
  }
  PyTuple_SET_ITEM(out, 0, which_bytes);
  PyTuple_SET_ITEM(out, 1, tail_bytes);
  return out;
}

PyObject* TraceTails(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  Buffer block;
  if (nargs == 8 && !block.Get(args[0], "block")) return nullptr;
  return Tails({block.mutable_data(), block.size()}, args, nargs, nullptr);
}

// summaries(template, offsets, starts, members, codes, totals, count, block, row_width)
//   -> bytes | None: execution_template's Execution bytes: a copy of template with, at byte
//   offsets[b], block b's `count` debug values (1, 4 or 10) from the sum of the buffer rows
//   members[starts[b]:starts[b + 1]] (u32 each); codes[b] its dtype code (f64), totals[b]
//   bit 0 set for a tuple's totals (rank 0), bit 1 for an output's summary (*nonfinite, when
//   given, is set when such a block counts a NaN or an Inf). None when a member row was not
//   written.
// (args[7], the block, is read as `block`.)
PyObject* Fill(const Rows& block, PyObject* const* args, Py_ssize_t nargs, bool* nonfinite) {
  if (nargs != 9) {
    PyErr_Format(PyExc_TypeError, "summaries takes 9 arguments (%zd given)", nargs);
    return nullptr;
  }
  Buffer tmpl, offsets, starts, members, codes, totals;
  if (!tmpl.Get(args[0], "template") || !offsets.Get(args[1], "offsets") || !starts.Get(args[2], "starts") ||
      !members.Get(args[3], "members") || !codes.Get(args[4], "codes") || !totals.Get(args[5], "totals")) {
    return nullptr;
  }
  const long long count = PyLong_AsLongLong(args[6]);
  const long long width = PyLong_AsLongLong(args[8]);
  if (PyErr_Occurred()) return nullptr;
  const size_t blocks = offsets.size() / 4, num_members = members.size() / 4;
  const size_t rows = block.size / (8 * (width > 0 ? width : 1));
  bool valid = (count == 1 || count == 4 || count == 10) && width >= 8 && starts.size() == 4 * (blocks + 1) &&
               codes.size() == 8 * blocks && totals.size() == blocks;
  for (size_t b = 0; valid && b < blocks; ++b) {
    uint32_t offset, begin, end;
    std::memcpy(&offset, offsets.data() + 4 * b, 4);
    std::memcpy(&begin, starts.data() + 4 * b, 4);
    std::memcpy(&end, starts.data() + 4 * (b + 1), 4);
    valid = offset + 8 * count <= tmpl.size() && begin <= end && end <= num_members;
  }
  for (size_t m = 0; valid && m < num_members; ++m) {
    uint32_t row;
    std::memcpy(&row, members.data() + 4 * m, 4);
    valid = row < rows;
  }
  if (!valid) {
    PyErr_SetString(PyExc_ValueError, "summaries: the template does not describe the stats rows");
    return nullptr;
  }
  for (size_t m = 0; m < num_members; ++m) {
    uint32_t row;
    std::memcpy(&row, members.data() + 4 * m, 4);
    if (At(block.data + 8 * row * width, 0) == 0.0) Py_RETURN_NONE;  // a kernel that did not run
  }
  PyObject* out = RecycledBytes(tmpl.data(), static_cast<Py_ssize_t>(tmpl.size()));
  if (out == nullptr) return nullptr;
  char* bytes = PyBytes_AS_STRING(out);
  for (size_t b = 0; b < blocks; ++b) {
    uint32_t offset, begin, end;
    std::memcpy(&offset, offsets.data() + 4 * b, 4);
    std::memcpy(&begin, starts.data() + 4 * b, 4);
    std::memcpy(&end, starts.data() + 4 * (b + 1), 4);
    Counts counts;
    for (uint32_t m = begin; m < end; ++m) {
      uint32_t row;
      std::memcpy(&row, members.data() + 4 * m, 4);
      counts.Add(block.data + 8 * row * width);
    }
    PutValues(bytes + offset, counts, count, At(codes.data(), b), (totals.data()[b] & 1) ? 0.0 : counts.rank);
    if (nonfinite != nullptr && (totals.data()[b] & 2) && counts.Nonfinite()) *nonfinite = true;
  }
  return out;
}

PyObject* Summaries(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  Buffer block;
  if (nargs == 9 && !block.Get(args[7], "block")) return nullptr;
  return Fill({block.mutable_data(), block.size()}, args, nargs, nullptr);
}

// first_nonfinite(block, rows, row_width, health) -> int: the first kernel row (0-based,
// buffer row + 1) that ran and either holds counts (health[i] & 1) that counted a NaN or an
// Inf, or counts in which only a NaN matters (health[i] & 4: a kernel writing a mask's -inf,
// whose NaN is computed) that counted one, or (the call's flag set, health[i] & 2) whose
// fused ops made one; -1 when none did.
// (args[0], the block, is read as `block`.)
PyObject* FirstIn(const Rows& block, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_Format(PyExc_TypeError, "first_nonfinite takes 4 arguments (%zd given)", nargs);
    return nullptr;
  }
  Buffer health;
  if (!health.Get(args[3], "health")) return nullptr;
  const long long rows = PyLong_AsLongLong(args[1]);
  const long long width = PyLong_AsLongLong(args[2]);
  if (PyErr_Occurred()) return nullptr;
  if (rows < 1 || width < 8 || block.size < static_cast<size_t>(rows * width) * 8 ||
      health.size() < static_cast<size_t>(rows - 1)) {
    PyErr_SetString(PyExc_ValueError, "first_nonfinite: the arguments do not describe the stats rows");
    return nullptr;
  }
  const bool inner = InnerFlagged(block.data, width);
  for (long long r = 1; r < rows; ++r) {
    const char* row = block.data + 8 * r * width;
    const char hunted = health.data()[r - 1];
    if (inner && (hunted & 2) && At(row, 0) != 0.0 && At(row, kInnerColumn) > 0.0) {
      return PyLong_FromLongLong(r - 1);
    }
    if (!(hunted & 5) || At(row, 0) == 0.0) continue;
    Counts counts;
    counts.Add(row);
    if ((hunted & 1) ? counts.Nonfinite() : counts.Nan() != 0.0) return PyLong_FromLongLong(r - 1);
  }
  return PyLong_FromLong(-1);
}

PyObject* FirstNonfinite(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  Buffer block;
  if (nargs == 4 && !block.Get(args[0], "block")) return nullptr;
  return FirstIn({block.mutable_data(), block.size()}, args, nargs);
}

// Column 0 of every row set to 0 (no kernel ran): the buffer ready for its next call
// (writable: whether call_rows could read the block as writable).
bool ClearStamps(const Rows& buffer, long long width, bool writable) {
  if (!writable) {
    PyErr_SetString(PyExc_TypeError, "block must be a contiguous writable bytes-like object");
    return false;
  }
  if (width < 1) {
    PyErr_SetString(PyExc_ValueError, "call_rows: bad row width");
    return false;
  }
  const size_t row_bytes = 8 * static_cast<size_t>(width);
  const double zero = 0.0;
  for (size_t offset = 0; offset + row_bytes <= buffer.size; offset += row_bytes) {
    std::memcpy(buffer.data + offset, &zero, 8);
  }
  return true;
}

// call_rows(block, tails, summaries, scan, clear)
//   -> (which, tails, execution, bad, cleared, nonfinite):
// one call's three passes in one CPython call (a training step's call pays ~1 us per
// Python step):
//   tails: trace_tails' arguments after block; summaries: those of summaries without block
//   (template .. count, row_width), or None: execution is None; scan: first_nonfinite's
//   (rows, row_width, health), or None: bad is -1; either way, when first_nonfinite finds
//   none, the first row whose fused ops made a NaN or an Inf that its output hides
//   (FirstMasked: the caller records them, and scans again what the hunt looks at);
//   clear: once read, the block's column 0 is set to 0 (see ClearStamps), unless the
//   summaries found a row not written or a row hides what its ops made (the caller reads
//   the buffer again); cleared says so;
//   nonfinite: whether a trace's or an output's counts hold a NaN or an Inf, or a kernel
//   hides one its ops made (None when the tails hold no counts: the writer's accounting of
//   calls, for free here).
PyObject* CallRows(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != 7 ||
      (args[2] != Py_None && (!PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) != 8)) ||
      (args[3] != Py_None && (!PyTuple_Check(args[3]) || PyTuple_GET_SIZE(args[3]) != 3))) {
    PyErr_SetString(PyExc_TypeError,
                    "call_rows(block, tails: 7-tuple, summaries: 8-tuple | None, scan: 3-tuple | None, clear)");
    return nullptr;
  }
  PyObject* block = args[0];
  Buffer held;  // the pool's buffers are writable (ClearStamps needs it); another is read as it is
  const bool writable = held.Get(block, "block", true);
  if (!writable) {
    PyErr_Clear();
    if (!held.Get(block, "block")) return nullptr;
  }
  const Rows rows_block = {held.mutable_data(), held.size()};
  PyObject* forwarded[9];
  forwarded[0] = block;
  for (int k = 0; k < 7; ++k) forwarded[k + 1] = PyTuple_GET_ITEM(args[1], k);
  bool nonfinite = false;
  PyObject* tails = Tails(rows_block, forwarded, 8, &nonfinite);
  if (tails == nullptr) return nullptr;
  const bool counted = PyLong_AsLongLong(PyTuple_GET_ITEM(args[1], 3)) != 0;  // debug values per trace
  PyObject* execution = Py_None;
  Py_INCREF(execution);
  if (args[2] != Py_None) {
    for (int k = 0; k < 7; ++k) forwarded[k] = PyTuple_GET_ITEM(args[2], k);
    forwarded[7] = block;
    forwarded[8] = PyTuple_GET_ITEM(args[2], 7);
    Py_DECREF(execution);
    execution = Fill(rows_block, forwarded, 9, &nonfinite);
  }
  PyObject* bad = nullptr;
  bool inner = false;
  long long masked_row = -1;
  if (execution != nullptr) {
    const long long width = PyLong_AsLongLong(PyTuple_GET_ITEM(args[1], 1));
    const long long rows = PyLong_AsLongLong(PyTuple_GET_ITEM(args[1], 0));
    // trace_tails checked that the block holds rows * width doubles.
    const long long masked =
        !PyErr_Occurred() && InnerFlagged(rows_block.data, width) ? FirstMasked(rows_block.data, rows, width) : -1;
    inner = masked >= 0;
    masked_row = masked;
    if (inner) nonfinite = true;  // the call holds an alert: kept like a call with a NaN
    if (inner && args[3] == Py_None) bad = PyLong_FromLongLong(masked);
  }
  if (execution != nullptr && bad == nullptr && !PyErr_Occurred()) {
    if (args[3] == Py_None) {
      bad = PyLong_FromLong(-1);
    } else {
      forwarded[0] = block;
      for (int k = 0; k < 3; ++k) forwarded[k + 1] = PyTuple_GET_ITEM(args[3], k);
      bad = FirstIn(rows_block, forwarded, 4);
      if (inner && bad != nullptr && PyLong_AsLongLong(bad) < 0) {  // not hunted (a mask's kernel)
        Py_DECREF(bad);
        bad = PyLong_FromLongLong(masked_row);
      }
    }
  }
  int clear = bad == nullptr ? -1 : (inner ? 0 : PyObject_IsTrue(args[4]));
  if (clear == 1 && (args[2] == Py_None || execution != Py_None)) {
    clear = ClearStamps(rows_block, PyLong_AsLongLong(PyTuple_GET_ITEM(args[1], 1)), writable) ? 1 : -1;
  } else if (clear == 1) {
    clear = 0;
  }
  PyObject* out = clear < 0 ? nullptr : PyTuple_New(6);
  if (out == nullptr) {
    Py_DECREF(tails);
    Py_XDECREF(execution);
    Py_XDECREF(bad);
    return nullptr;
  }
  PyTuple_SET_ITEM(out, 0, PyTuple_GET_ITEM(tails, 0));
  PyTuple_SET_ITEM(out, 1, PyTuple_GET_ITEM(tails, 1));
  Py_INCREF(PyTuple_GET_ITEM(tails, 0));
  Py_INCREF(PyTuple_GET_ITEM(tails, 1));
  Py_DECREF(tails);
  PyTuple_SET_ITEM(out, 2, execution);
  PyTuple_SET_ITEM(out, 3, bad);
  PyTuple_SET_ITEM(out, 4, PyBool_FromLong(clear));
  PyObject* health = counted || args[2] != Py_None ? PyBool_FromLong(nonfinite) : Py_None;
  if (health == Py_None) Py_INCREF(health);
  PyTuple_SET_ITEM(out, 5, health);
  return out;
}

PyMethodDef kMethods[] = {
    {"trace_tails", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(TraceTails)), METH_FASTCALL,
     "trace_tails(block, rows, row_width, traced, count, codes, stats_column, rate) -> (which, tails)"},
    {"summaries", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Summaries)), METH_FASTCALL,
     "summaries(template, offsets, starts, members, codes, totals, count, block, row_width) -> bytes | None"},
    {"first_nonfinite", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FirstNonfinite)), METH_FASTCALL,
     "first_nonfinite(block, rows, row_width, health) -> int"},
    {"call_rows", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(CallRows)), METH_FASTCALL,
     "call_rows(block, tails, summaries, scan, clear) -> (which, tails, execution, bad, cleared, nonfinite)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "native_rows", "Trace tails of stats rows.", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit_native_rows() { return PyModule_Create(&kModule); }
