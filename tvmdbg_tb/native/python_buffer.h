// Shared by the CPython extensions (tvmdbg_tb.native.PythonExtension puts this directory on
// the include path and keys each build on this header too).
#ifndef TVMDBG_NATIVE_PYTHON_BUFFER_H_
#define TVMDBG_NATIVE_PYTHON_BUFFER_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>

namespace tvmdbg {

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

}  // namespace tvmdbg

#endif  // TVMDBG_NATIVE_PYTHON_BUFFER_H_
