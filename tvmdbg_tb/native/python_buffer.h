// Shared by the CPython extensions (tvmdbg_tb.native.PythonExtension puts this directory on
// the include path and keys each build on this header too).
#ifndef TVMDBG_NATIVE_PYTHON_BUFFER_H_
#define TVMDBG_NATIVE_PYTHON_BUFFER_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstring>

namespace tvmdbg {

// Memory handed between the extensions (queued_call.h, call_rows.h): not owned.
struct Bytes {
  const char* data;
  size_t size;
};

// A bytes-like argument's memory (bytes, a numpy array...), released when it goes out of scope.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (held_) PyBuffer_Release(&view_);
  }
  // False, with a TypeError naming `what`, when object exports no C-contiguous buffer
  // (writable: no writable one).
  bool Get(PyObject* object, const char* what, bool writable = false) {
    if (PyObject_GetBuffer(object, &view_, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) != 0) {
      PyErr_Format(PyExc_TypeError, "%s must be a contiguous%s bytes-like object", what, writable ? " writable" : "");
      return false;
    }
    held_ = true;
    return true;
  }
  const char* data() const { return static_cast<const char*>(view_.buf); }
  char* mutable_data() const { return static_cast<char*>(view_.buf); }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// Attribute and method names an extension looks up on the hot path, interned once at import.
struct InternedName {
  PyObject** slot;
  const char* text;
};

template <size_t N>
bool InternAll(const InternedName (&names)[N]) {
  for (const InternedName& name : names) {
    if ((*name.slot = PyUnicode_InternFromString(name.text)) == nullptr) return false;
  }
  return true;
}

// A new reference to bytes equal to data[0, size). A kilobyte-sized result made per traced
// call would come from glibc's malloc, and a request of that size makes glibc empty its
// fastbins (malloc_consolidate), which slows the traced program's own small allocations after
// the call. So such results are taken from a few kept objects: one that only this pool holds
// and that has the size is rewritten (its cached hash reset), and a new one is kept in turn.
inline PyObject* RecycledBytes(const char* data, Py_ssize_t size) {
#if PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED)
  constexpr Py_ssize_t kSmall = 512;  // pymalloc serves these
  constexpr int kKept = 8;
  static PyObject* kept[kKept] = {};
  static int next = 0;
  if (size <= kSmall) return PyBytes_FromStringAndSize(data, size);
  for (PyObject* object : kept) {
    if (object != nullptr && Py_REFCNT(object) == 1 && PyBytes_GET_SIZE(object) == size) {
      std::memcpy(PyBytes_AS_STRING(object), data, static_cast<size_t>(size));
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
      reinterpret_cast<PyBytesObject*>(object)->ob_shash = -1;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
      Py_INCREF(object);
      return object;
    }
  }
  PyObject* out = PyBytes_FromStringAndSize(data, size);
  if (out != nullptr) {
    Py_INCREF(out);
    Py_XSETREF(kept[next], out);
    next = (next + 1) % kKept;
  }
  return out;
#else
  return PyBytes_FromStringAndSize(data, size);
#endif
}

}  // namespace tvmdbg

#endif  // TVMDBG_NATIVE_PYTHON_BUFFER_H_
