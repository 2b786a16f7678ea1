// Trace tails of a compiled function's stats rows, in C++ (see native_tails.py): what
// fast_tracer's row loop appends to each kernel's constant fields (debug_values and
// duration_us), for every row of one call in one CPython call, without numpy's fixed
// cost per operation. The bytes are the loop's, double for double (no contraction).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <string>

namespace {

// A bytes-like argument's memory, released when it goes out of scope.
class Buffer {
 public:
  ~Buffer() {
    if (held_) PyBuffer_Release(&view_);
  }
  bool Get(PyObject* object, const char* what) {
    if (PyObject_GetBuffer(object, &view_, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Format(PyExc_TypeError, "%s must be a contiguous buffer", what);
      return false;
    }
    held_ = true;
    return true;
  }
  const char* data() const { return static_cast<const char*>(view_.buf); }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

void AppendDouble(std::string* out, double value) {
  char bytes[8];
  std::memcpy(bytes, &value, 8);  // little-endian hosts only (native_tails.py checks)
  out->append(bytes, 8);
}

double At(const char* base, size_t index) {
  double value;
  std::memcpy(&value, base + 8 * index, 8);
  return value;
}

// tails(block, rows, row_width, traced, count, codes, stats_column, rate) -> (which, tails)
//   block: the stats buffer (float64, row-major, row_width columns); rows 1..rows-1 are
//     kernel rows (row 0: the call's start), a row ran when its column 0 (cycles) is set;
//   traced: one byte per kernel row, nonzero when the row has a trace;
//   count: debug values per trace: 0 (duration only), 1 CURT, 4 CONCISE, 10 FULL_HEALTH,
//     15 FULL_STATS (the 10 plus columns stats_column..+4); codes: a float64 dtype code
//     per kernel row (FULL_HEALTH, FULL_STATS);
// returns each traced row that ran (u32 row - 1 each) and its tail, end to end.
PyObject* Tails(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 8) {
    PyErr_Format(PyExc_TypeError, "tails takes 8 arguments (%zd given)", nargs);
    return nullptr;
  }
  Buffer block, traced, codes;
  if (!block.Get(args[0], "block") || !traced.Get(args[3], "traced") || !codes.Get(args[5], "codes")) return nullptr;
  const long long rows = PyLong_AsLongLong(args[1]);
  const long long width = PyLong_AsLongLong(args[2]);
  const long long count = PyLong_AsLongLong(args[4]);
  const long long stats = PyLong_AsLongLong(args[6]);
  const double rate = PyFloat_AsDouble(args[7]);
  if (PyErr_Occurred()) return nullptr;
  const bool health = count == 1 || count == 4 || count == 10 || count == 15;
  if (rows < 1 || width < 8 || (count != 0 && !health) || block.size() < static_cast<size_t>(rows * width) * 8 ||
      traced.size() < static_cast<size_t>(rows - 1) ||
      (count >= 10 && codes.size() < static_cast<size_t>(rows - 1) * 8) || (count == 15 && stats + 5 > width)) {
    PyErr_SetString(PyExc_ValueError, "tails: the arguments do not describe the stats rows");
    return nullptr;
  }
  const char* base = block.data();
  const size_t tail_size = count ? 2 + 8 * count + 9 : 9;
  try {
    std::string which, tails;
    which.reserve(4 * rows);
    tails.reserve(tail_size * rows);
    double previous = At(base, 0);
    for (long long r = 1; r < rows; ++r) {
      const char* row = base + 8 * r * width;
      const double cycles = At(row, 0);
      if (cycles == 0.0) continue;  // did not run
      const double duration = (cycles - previous) / rate;
      previous = cycles;
      if (!traced.data()[r - 1]) continue;
      const uint32_t k = static_cast<uint32_t>(r - 1);
      which.append(reinterpret_cast<const char*>(&k), 4);
      if (count) {
        const double size = At(row, 1), lt = At(row, 2), gt = At(row, 3), eq = At(row, 4);
        const double neg_inf = At(row, 5), pos_inf = At(row, 6);
        const double nan = size - lt - gt - eq;
        tails.push_back(0x42);  // debug_values, packed
        tails.push_back(static_cast<char>(8 * count));
        if (count == 1) {
          AppendDouble(&tails, neg_inf + pos_inf + nan > 0 ? 1.0 : 0.0);
        } else if (count == 4) {
          for (double v : {size, neg_inf, pos_inf, nan}) AppendDouble(&tails, v);
        } else {
          const double code = At(codes.data(), r - 1);
          for (double v : {0.0, code, At(row, 7), size, neg_inf, pos_inf, nan, lt - neg_inf, eq, gt - pos_inf}) {
            AppendDouble(&tails, v);
          }
          if (count == 15) {
            for (long long c = 0; c < 5; ++c) AppendDouble(&tails, At(row, stats + c));
          }
        }
      }
      tails.push_back(0x59);  // duration_us, a double
      AppendDouble(&tails, duration);
    }
    PyObject* which_bytes = PyBytes_FromStringAndSize(which.data(), static_cast<Py_ssize_t>(which.size()));
    PyObject* tail_bytes = PyBytes_FromStringAndSize(tails.data(), static_cast<Py_ssize_t>(tails.size()));
    if (which_bytes == nullptr || tail_bytes == nullptr) {
      Py_XDECREF(which_bytes);
      Py_XDECREF(tail_bytes);
      return nullptr;
    }
    return Py_BuildValue("(NN)", which_bytes, tail_bytes);
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
}

PyMethodDef kMethods[] = {
    {"tails", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Tails)), METH_FASTCALL,
     "tails(block, rows, row_width, traced, count, codes, stats_column, rate) -> (which, tails)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "native_tails", "Trace tails of stats rows.", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit_native_tails() { return PyModule_Create(&kModule); }
