// The compiled tracer's steady-state VM call in C++ (see native_call.py for why).
//
// Tracer(hooks, local, ids, session, call_rows, queue_call) holds one CompiledTracer's
// per-session caches: each call point's CodeLocation bytes (keyed like frames.capture_call:
// the innermost kKeyFrames frames' code objects and bytecode offsets) and each (function,
// argument count)'s call_rows arguments, read once into a plan of native_rows (its C entry, the
// capsule native_rows.CALL_ROWS, call_rows.h). Tracer.bind(name, fid, function, fallback)
// returns a Function: what vm[name] returns. Calling it does what CompiledTracer.call and
// _finish_fast do for a call whose records come from one stats buffer through call_rows'
// passes (run in C: no Python object made or parsed for them), and hands every
// other case to Python: a call inside a traced call or time_evaluator (fallback), a call
// point or argument count seen for the first time (hooks._native_location, _native_plan),
// and, after the VM returned, anything but one buffer of the function whose rows and
// Execution are complete and finite (hooks._native_finish, with call_rows' result when it
// ran). Errors of tvmdbg's own go to hooks._native_warn (a warning, as CompiledTracer._safely
// gives): a debugger bug never changes what the user's call returns or raises. The records go
// to the session's writer through queue_call, native_records' C entry (its capsule
// QUEUE_CALL, queued_call.h): no Python object is made for them.
//
// A (function, argument count) has a static plan (a function of tensors of static shapes), or
// up to kMaxVariants plans learned from calls the Python path recorded (call_plans.py: objects
// such as a KV cache, weights summarised once per value, shapes that vary), each with a guard:
// the checks under which its constant bytes are what Python would write (Passes). After the
// VM returned, the first plan whose guard passes records the call; none: Python does.

#include <time.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <unordered_map>

#include <tvm/ffi/c_api.h>

#include <vector>

#include "call_rows.h"
#include "python_buffer.h"
#include "queued_call.h"

namespace {

constexpr int kKeyFrames = 8;  // frames.KEY_FRAMES
constexpr size_t kMaxEntries = 10000;
constexpr int kMaxVariants = 4;  // plans per (function, argument count)

PyObject* s_call;
PyObject* s_implicit;
PyObject* s_dict;
PyObject* s_pool;
PyObject* s_replay;
PyObject* s_hunting;
PyObject* s_sole_writer;
PyObject* s_idle_checks;
PyObject* s_native_location;
PyObject* s_native_plan;
PyObject* s_native_finish;
PyObject* s_next_call_number;
PyObject* s_native_emit;
PyObject* s_native_warn;
PyObject* s_shape;

double Clock(clockid_t which) {
  timespec now;
  clock_gettime(which, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

struct Key {
  std::array<uintptr_t, 2 * kKeyFrames> words{};
  int size = 0;
  bool operator==(const Key& other) const { return size == other.size && words == other.words; }
};

struct KeyHash {
  size_t operator()(const Key& key) const {
    size_t hash = static_cast<size_t>(key.size);
    for (int k = 0; k < 2 * key.size; ++k) hash = (hash ^ key.words[k]) * 0x100000001b3ULL;
    return hash;
  }
};

// A call point: its location bytes, the captured stack and user frame index (for
// _native_finish), and its code objects, held so that no other code object takes their
// addresses while the entry lives.
struct Location {
  PyObject* bytes = nullptr;
  PyObject* stack = nullptr;
  PyObject* user_index = nullptr;
  std::array<PyObject*, kKeyFrames> codes{};
};

// A (function, argument count)'s constants, and the guard of a learned plan (None: a static
// plan, always valid); described: the 7-tuple they came from, what Python is handed back;
// rows: its tails, summaries and scan as native_rows' plan (a capsule owning rows_plan).
struct Plan {
  PyObject* described = nullptr;
  PyObject* statics = nullptr;
  PyObject* width = nullptr;
  PyObject* tails = nullptr;
  PyObject* summaries = nullptr;
  PyObject* execution = nullptr;
  PyObject* scan = nullptr;
  PyObject* guard = nullptr;
  PyObject* rows = nullptr;
  const tvmdbg::RowsPlan* rows_plan = nullptr;
};

// The plans of a (function, argument count); none: the native path does not serve it.
struct Plans {
  std::array<Plan, kMaxVariants> plan{};
  int count = 0;
};

struct Tracer {
  PyObject_HEAD
  PyObject* hooks;
  PyObject* local;
  PyObject* ids;
  PyObject* session;
  PyObject* call_numbers;  // the VM's call counters by function name (vm_tracer.Tracer.call_numbers)
  PyObject* call_rows;   // native_rows.CALL_ROWS, the capsule of rows
  PyObject* queue_call;  // native_records.QUEUE_CALL, the capsule of queue
  const tvmdbg::CallRowsEntry* rows;
  tvmdbg::QueueCallFunction queue;
  std::unordered_map<Key, Location, KeyHash>* locations;
  std::unordered_map<long long, Plans>* plans;
  unsigned long long recorded;  // calls whose records this C++ wrote (counts())
};

struct Function {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  Tracer* tracer;
  PyObject* name;
  PyObject* function;
  PyObject* fallback;
  long long fid;
};

// What "tvmdbg.stats" (fast_tracer._stats) sees as the current call: where it appends the
// buffers it hands out.
struct Marker {
  PyObject_HEAD
  PyObject* buffers;
};

extern PyTypeObject kTracerType;
extern PyTypeObject kFunctionType;
extern PyTypeObject kMarkerType;

void HoldPlan(const Plan& plan) {
  for (PyObject* field : {plan.described, plan.statics, plan.width, plan.tails, plan.summaries, plan.execution,
                          plan.scan, plan.guard, plan.rows}) {
    Py_XINCREF(field);
  }
}

void DropPlan(Plan* plan) {
  for (PyObject** field : {&plan->described, &plan->statics, &plan->width, &plan->tails, &plan->summaries,
                           &plan->execution, &plan->scan, &plan->guard, &plan->rows}) {
    Py_CLEAR(*field);
  }
  plan->rows_plan = nullptr;
}

void HoldPlans(const Plans& plans) {
  for (int k = 0; k < plans.count; ++k) HoldPlan(plans.plan[k]);
}

void DropPlans(Plans* plans) {
  for (int k = 0; k < plans->count; ++k) DropPlan(&plans->plan[k]);
  plans->count = 0;
}

PyObject* CompileGuard(PyObject* source);

// A plan from a NativePlan (tracing/native_call.py: the 7-tuple statics, width, tails, summaries, execution,
// scan, guard), its guard compiled and its rows' constants read by native_rows (entry: its
// CALL_ROWS; the same errors as call_rows gives), holding new references; false with an
// exception set when it is none.
bool PlanFrom(PyObject* described, const tvmdbg::CallRowsEntry* entry, Plan* plan) {
  if (!PyTuple_Check(described) || PyTuple_GET_SIZE(described) != 7) {
    PyErr_SetString(PyExc_TypeError, "a plan is a 7-tuple (statics, width, tails, summaries, execution, scan, guard)");
    return false;
  }
  PyObject** fields[6] = {&plan->statics, &plan->width, &plan->tails, &plan->summaries, &plan->execution, &plan->scan};
  for (int k = 0; k < 6; ++k) *fields[k] = PyTuple_GET_ITEM(described, k);
  PyObject* rows = entry->plan(plan->tails, plan->summaries, plan->scan);
  PyObject* guard = rows == nullptr ? nullptr : CompileGuard(PyTuple_GET_ITEM(described, 6));
  if (guard == nullptr) {
    Py_XDECREF(rows);
    *plan = Plan{};  // none held
    return false;
  }
  plan->described = described;
  plan->guard = plan->rows = nullptr;
  HoldPlan(*plan);
  plan->guard = guard;  // its new reference
  plan->rows = rows;    // its new reference
  plan->rows_plan = static_cast<const tvmdbg::RowsPlan*>(PyCapsule_GetPointer(rows, tvmdbg::kRowsPlanCapsule));
  return true;
}

void DropLocation(Location* location) {
  Py_CLEAR(location->bytes);
  Py_CLEAR(location->stack);
  Py_CLEAR(location->user_index);
  for (PyObject*& code : location->codes) Py_CLEAR(code);
}

// -- the stats buffers ------------------------------------------------------------------------

// One stats buffer: the Python objects own its memory; handle and data point into them.
struct PoolBuffer {
  long long fid = 0;
  PyObject* tensor = nullptr;  // a tvm.runtime.Tensor (nrows, row width) float64
  PyObject* array = nullptr;   // its numpy view
  TVMFFIObjectHandle handle = nullptr;
  double* data = nullptr;
  long long nrows = 0;
  bool clean = false;  // column 0 is all 0 (every row unwritten)
};

struct ThreadPool {
  std::unordered_map<long long, std::vector<PoolBuffer*>> free;  // by function id
  std::vector<PoolBuffer*> handed;  // handed out during the traced call running here
  int active = 0;                   // a call of this module's runs on this thread
};

thread_local ThreadPool* t_pool = nullptr;

ThreadPool* ThisThreadPool() {
  if (t_pool == nullptr) t_pool = new ThreadPool();
  return t_pool;
}

TVMFFIObjectHandle g_python_stats = nullptr;  // fast_tracer._stats, as a tvm_ffi function
PyObject* g_new_buffer = nullptr;             // fast_tracer._new_buffer(nrows) -> (tensor, array)
long long g_row_width = 0;

// A PoolBuffer over (tensor, array), holding new references; nullptr with an exception set.
PoolBuffer* Wrap(long long fid, PyObject* tensor, PyObject* array, bool clean) {
  PyObject* address = PyObject_CallMethod(tensor, "__chandle__", nullptr);
  if (address == nullptr) return nullptr;
  void* handle = PyLong_AsVoidPtr(address);
  Py_DECREF(address);
  Py_buffer view;
  if (handle == nullptr || PyObject_GetBuffer(array, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a stats buffer without its tensor");
    return nullptr;
  }
  PoolBuffer* buffer = new PoolBuffer();
  buffer->fid = fid;
  buffer->tensor = tensor;
  buffer->array = array;
  buffer->handle = handle;
  buffer->data = static_cast<double*>(view.buf);
  buffer->nrows = static_cast<long long>(view.len) / static_cast<long long>(sizeof(double) * g_row_width);
  buffer->clean = clean;
  PyBuffer_Release(&view);  // the array, held, keeps the memory
  Py_INCREF(tensor);
  Py_INCREF(array);
  return buffer;
}

// A pooled buffer of fid with nrows rows, or a new one (made in Python: the GIL is taken);
// nullptr when none could be made.
PoolBuffer* TakeOrMake(ThreadPool* pool, long long fid, long long nrows) {
  auto found = pool->free.find(fid);
  if (found != pool->free.end()) {
    std::vector<PoolBuffer*>& list = found->second;
    while (!list.empty()) {
      PoolBuffer* buffer = list.back();
      list.pop_back();
      if (buffer->nrows == nrows) return buffer;
      pool->handed.push_back(buffer);  // another layout under this id: Python releases it
    }
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  PoolBuffer* buffer = nullptr;
  PyObject* made = PyObject_CallFunction(g_new_buffer, "L", nrows);
  if (made != nullptr && PyTuple_Check(made) && PyTuple_GET_SIZE(made) == 2) {
    buffer = Wrap(fid, PyTuple_GET_ITEM(made, 0), PyTuple_GET_ITEM(made, 1), true);
  }
  Py_XDECREF(made);
  PyErr_Clear();  // nullptr: the caller forwards to Python, which makes its own or fails there
  PyGILState_Release(gil);
  return buffer;
}

int ForwardStats(const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  if (g_python_stats == nullptr) {
    TVMFFIErrorSetRaisedFromCStr("RuntimeError", "tvmdbg.stats: fast_tracer._stats is not installed");
    return -1;
  }
  std::vector<TVMFFIAny> copied(args, args + num_args);
  return TVMFFIFunctionCall(g_python_stats, copied.data(), num_args, result);
}

// "tvmdbg.stats"(fid, nrows): see the file's comment. Runs without the GIL on its fast path.
int Stats(void*, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  ThreadPool* pool = t_pool;
  if (pool == nullptr || pool->active == 0 || num_args != 2) return ForwardStats(args, num_args, result);
  const long long fid = args[0].v_int64;
  const long long nrows = args[1].v_int64;
  PoolBuffer* buffer = TakeOrMake(pool, fid, nrows);
  if (buffer == nullptr) return ForwardStats(args, num_args, result);
  if (!buffer->clean) {  // all of it: the inner-op check's cells too (a flagged call's: native_rows' Call)
    std::memset(buffer->data, 0, sizeof(double) * static_cast<size_t>(nrows * g_row_width));
  }
  buffer->clean = false;
  pool->handed.push_back(buffer);
  TVMFFIObjectIncRef(buffer->handle);
  TVMFFIAny out{};
  out.type_index = TVMFFIObjectGetTypeIndex(buffer->handle);
  out.v_obj = static_cast<TVMFFIObject*>(buffer->handle);
  *result = out;
  return 0;
}

// The buffers handed out on this thread, as fast_tracer's (fid, tensor, array) tuples appended
// to list (Python finishes the call and releases them); false with an exception set.
bool HandOver(ThreadPool* pool, PyObject* list) {
  bool ok = true;
  for (PoolBuffer* buffer : pool->handed) {
    PyObject* fid = ok ? PyLong_FromLongLong(buffer->fid) : nullptr;
    PyObject* entry = fid == nullptr ? nullptr : PyTuple_Pack(3, fid, buffer->tensor, buffer->array);
    ok = entry != nullptr && PyList_Append(list, entry) == 0;
    Py_XDECREF(fid);
    Py_XDECREF(entry);
    Py_DECREF(buffer->tensor);
    Py_DECREF(buffer->array);
    delete buffer;
  }
  pool->handed.clear();
  return ok;
}

// install_stats(python_stats, new_buffer, row_width): "tvmdbg.stats" served here from now on.
PyObject* InstallStats(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "install_stats(python_stats, new_buffer, row_width)");
    return nullptr;
  }
  PyObject* address = PyObject_CallMethod(args[0], "__chandle__", nullptr);
  void* handle = address == nullptr ? nullptr : PyLong_AsVoidPtr(address);
  Py_XDECREF(address);
  const long long width = PyLong_AsLongLong(args[2]);
  if (handle == nullptr || width <= 0 || PyErr_Occurred()) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "install_stats: bad arguments");
    return nullptr;
  }
  TVMFFIObjectIncRef(handle);  // held for the process
  if (g_python_stats != nullptr) TVMFFIObjectDecRef(g_python_stats);
  g_python_stats = handle;
  Py_INCREF(args[1]);
  Py_XSETREF(g_new_buffer, args[1]);
  g_row_width = width;
  TVMFFIObjectHandle function = nullptr;
  static const char kName[] = "tvmdbg.stats";
  TVMFFIByteArray name{kName, sizeof(kName) - 1};
  if (TVMFFIFunctionCreate(nullptr, Stats, nullptr, &function) != 0 || TVMFFIFunctionSetGlobal(&name, function, 1) != 0) {
    if (function != nullptr) TVMFFIObjectDecRef(function);
    PyErr_SetString(PyExc_RuntimeError, "tvmdbg: could not register the native tvmdbg.stats");
    return nullptr;
  }
  TVMFFIObjectDecRef(function);  // the registry holds it
  Py_RETURN_NONE;
}

// take(fid, nrows) -> (tensor, array, clean) from this thread's pool, or None.
PyObject* Take(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "take(fid, nrows)");
    return nullptr;
  }
  const long long fid = PyLong_AsLongLong(args[0]);
  const long long nrows = PyLong_AsLongLong(args[1]);
  if (PyErr_Occurred()) return nullptr;
  ThreadPool* pool = ThisThreadPool();
  auto found = pool->free.find(fid);
  if (found == pool->free.end() || found->second.empty() || found->second.back()->nrows != nrows) Py_RETURN_NONE;
  PoolBuffer* buffer = found->second.back();
  found->second.pop_back();
  PyObject* out = Py_BuildValue("(NNO)", buffer->tensor, buffer->array, buffer->clean ? Py_True : Py_False);
  delete buffer;  // its references went to the tuple
  return out;
}

// release(fid, tensor, array, clean): into this thread's pool.
PyObject* ReleaseToPool(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || g_row_width <= 0) {
    PyErr_SetString(PyExc_TypeError, "release(fid, tensor, array, clean) after install_stats");
    return nullptr;
  }
  const long long fid = PyLong_AsLongLong(args[0]);
  const int clean = PyObject_IsTrue(args[3]);
  if (PyErr_Occurred() || clean < 0) return nullptr;
  PoolBuffer* buffer = Wrap(fid, args[1], args[2], clean == 1);
  if (buffer == nullptr) return nullptr;
  ThisThreadPool()->free[fid].push_back(buffer);
  Py_RETURN_NONE;
}

// -- the Execution's bytes for Python ------------------------------------------------------------

// _native_emit's payload: the Execution's constant bytes, then its per-call fields.
PyObject* Payload(tvmdbg::Bytes execution, const tvmdbg::ExecutionFields& fields) {
  const size_t head = execution.size;
  thread_local std::vector<char> scratch;  // then copied into bytes of the exact size (RecycledBytes)
  scratch.resize(head + tvmdbg::ExecutionFieldsSize(fields));
  std::memcpy(scratch.data(), execution.data, head);
  char* end = tvmdbg::PutExecutionFields(scratch.data() + head, fields);
  return tvmdbg::RecycledBytes(scratch.data(), end - scratch.data());
}

// -- the caches --------------------------------------------------------------------------------

// The caller's call point, as new references in *out (false with an exception set on failure).
bool Locate(Tracer* tracer, Location* out) {
  Key key;
  PyFrameObject* frame = PyThreadState_GetFrame(PyThreadState_Get());
  while (frame != nullptr && key.size < kKeyFrames) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    key.words[2 * key.size] = reinterpret_cast<uintptr_t>(code);
    key.words[2 * key.size + 1] = static_cast<uintptr_t>(PyFrame_GetLasti(frame));
    Py_DECREF(code);
    ++key.size;
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  auto found = tracer->locations->find(key);
  if (found == tracer->locations->end()) {
    PyObject* described = PyObject_CallMethodNoArgs(tracer->hooks, s_native_location);
    if (described == nullptr) return false;
    if (!PyTuple_Check(described) || PyTuple_GET_SIZE(described) != 3 ||
        !PyBytes_Check(PyTuple_GET_ITEM(described, 0))) {
      Py_DECREF(described);
      PyErr_SetString(PyExc_TypeError, "_native_location must return (bytes, stack, user_index)");
      return false;
    }
    Location entry;
    entry.bytes = PyTuple_GET_ITEM(described, 0);
    entry.stack = PyTuple_GET_ITEM(described, 1);
    entry.user_index = PyTuple_GET_ITEM(described, 2);
    if (tracer->locations->size() >= kMaxEntries) {  // a full cache: served, not kept
      *out = entry;
      Py_INCREF(out->bytes);
      Py_INCREF(out->stack);
      Py_INCREF(out->user_index);
      Py_DECREF(described);
      return true;
    }
    Py_INCREF(entry.bytes);
    Py_INCREF(entry.stack);
    Py_INCREF(entry.user_index);
    Py_DECREF(described);
    frame = PyThreadState_GetFrame(PyThreadState_Get());
    for (int k = 0; frame != nullptr && k < kKeyFrames; ++k) {
      entry.codes[k] = reinterpret_cast<PyObject*>(PyFrame_GetCode(frame));
      PyFrameObject* back = PyFrame_GetBack(frame);
      Py_DECREF(frame);
      frame = back;
    }
    Py_XDECREF(frame);
    auto inserted = tracer->locations->emplace(key, entry);
    if (!inserted.second) DropLocation(&entry);  // another thread described it meanwhile
    found = inserted.first;
  }
  *out = found->second;
  out->codes = {};  // the entry holds them
  Py_INCREF(out->bytes);
  Py_INCREF(out->stack);
  Py_INCREF(out->user_index);
  return true;
}

// The plans of (fid, nargs), as new references in *out (false with an exception set on
// failure; out->count 0: Python serves this call).
bool PlanOf(Function* function, Py_ssize_t nargs, Plans* out) {
  Tracer* tracer = function->tracer;
  if (nargs >= (1 << 20)) return true;  // out->count stays 0
  const long long key = function->fid << 20 | static_cast<long long>(nargs);
  auto found = tracer->plans->find(key);
  if (found == tracer->plans->end()) {
    PyObject* count = PyLong_FromSsize_t(nargs);
    if (count == nullptr) return false;
    PyObject* described = PyObject_CallMethodObjArgs(tracer->hooks, s_native_plan, function->name, count, nullptr);
    Py_DECREF(count);
    if (described == nullptr) return false;
    Plans plans;
    if (described != Py_None) {
      if (!PlanFrom(described, tracer->rows, &plans.plan[0])) {
        Py_DECREF(described);
        return false;
      }
      plans.count = 1;
    }
    Py_DECREF(described);
    auto inserted = tracer->plans->emplace(key, plans);
    if (!inserted.second) DropPlans(&plans);  // another thread described it meanwhile
    found = inserted.first;
  }
  *out = found->second;
  HoldPlans(*out);
  return true;
}

// -- the guards of learned plans -----------------------------------------------------------------
//
// A guard comes from call_plans.py as a tuple of checks; PlanFrom compiles it once into a
// Guard (the checks as C++ values), so that the checks after each call read the tensors'
// DLTensor shapes and the parameter cache's generation counter in C, with no Python attribute
// read or object made.

enum Check : long {
  kArgType = 0,   // (0, k, type): args[k] is of exactly that type (an object: its summary names it)
  kArgShape = 1,  // (1, k, shape): args[k].shape == shape (a tensor of symbolic shape)
  kArgSame = 2,   // (2, k, same, cell, generation): args[k] is `same`, or a list or tuple of
                  // exactly same's items (a tuple), and cell (a buffer of one int64, the
                  // parameter cache's generation: param_cache.SummaryCache) holds generation
                  // (weights whose summary repeats)
  kOutType = 3,   // (3, path, type): the returned value at path (item indices) is of that type
  kOutShape = 4,  // (4, path, shape): ... has that shape
  kRows = 5,      // (5, checks): int64 pairs (index of a double in the stats buffer, value): the
                  // buffer holds them (the dims a kernel's summary wrote of a symbolic shape)
};

struct GuardCheck {
  long kind = -1;
  Py_ssize_t arg = 0;
  PyObject* path = nullptr;  // kOutType, kOutShape: borrowed from the guard's tuple
  std::vector<int64_t> items;  // ... its indices
  int32_t type_index = -1;   // kOutType: the type's tvm_ffi type index (-1: none)
  PyObject* object = nullptr;  // the type, the shape tuple or `same` (borrowed)
  std::vector<int64_t> values;  // the shape's dims; kRows: the (index, value) pairs
  const int64_t* cell = nullptr;  // kArgSame: the generation counter
  int64_t generation = 0;
};

// A compiled guard: a Python object, held by its plans like their other fields.
struct Guard {
  PyObject_HEAD
  PyObject* source;  // the tuple compiled (holds what the checks borrow)
  std::vector<GuardCheck>* checks;
  std::vector<Py_buffer>* cells;  // the generation counters' buffers, held
};

extern PyTypeObject kGuardType;

void GuardDealloc(PyObject* object) {
  Guard* self = reinterpret_cast<Guard*>(object);
  if (self->cells != nullptr) {
    for (Py_buffer& view : *self->cells) PyBuffer_Release(&view);
  }
  delete self->cells;
  delete self->checks;
  Py_XDECREF(self->source);
  Py_TYPE(object)->tp_free(object);
}

PyTypeObject* g_object_type = nullptr;  // tvm_ffi.core.CObject, the base of its Python objects
Py_ssize_t g_chandle_offset = 0;        // of its handle in the Python object (0: not found yet, -1: none)

// The tvm_ffi handle of a tvm_ffi object's Python object (nullptr: not one, or its handle
// cannot be read). The handle is the Cython base object's field; its offset is found once,
// from the first object's __chandle__().
void* ObjectHandle(PyObject* value) {
  if (g_object_type == nullptr || g_chandle_offset < 0 || !PyObject_TypeCheck(value, g_object_type)) return nullptr;
  if (g_chandle_offset == 0) {
    PyObject* address = PyObject_CallMethod(value, "__chandle__", nullptr);
    void* handle = address == nullptr ? nullptr : PyLong_AsVoidPtr(address);
    Py_XDECREF(address);
    PyErr_Clear();
    g_chandle_offset = -1;
    const size_t size = static_cast<size_t>(g_object_type->tp_basicsize);
    for (size_t at = sizeof(PyObject); handle != nullptr && at + sizeof(void*) <= size; at += sizeof(void*)) {
      if (*reinterpret_cast<void**>(reinterpret_cast<char*>(value) + at) == handle) {
        g_chandle_offset = static_cast<Py_ssize_t>(at);
        break;
      }
    }
    if (g_chandle_offset < 0) return nullptr;
  }
  return *reinterpret_cast<void**>(reinterpret_cast<char*>(value) + g_chandle_offset);
}

// The value at items (indices into Arrays) of a tvm_ffi object (false: the path does not go
// through tvm_ffi Arrays: Python reads it).
bool ValueAt(PyObject* value, const std::vector<int64_t>& items, TVMFFIAny* out) {
  void* handle = ObjectHandle(value);
  if (handle == nullptr) return false;
  TVMFFIAny at{};
  at.type_index = TVMFFIObjectGetTypeIndex(handle);
  at.v_obj = static_cast<TVMFFIObject*>(handle);
  for (const int64_t item : items) {
    if (at.type_index != kTVMFFIArray) return false;
    const auto* cell = reinterpret_cast<const TVMFFISeqCell*>(reinterpret_cast<const char*>(at.v_obj) + sizeof(TVMFFIObject));
    if (item < 0 || item >= cell->size) return false;
    at = static_cast<const TVMFFIAny*>(cell->data)[item];
  }
  *out = at;
  return true;
}

// 1 when a tvm_ffi value is a tensor of the check's shape, else 0.
int DimsAre(const TVMFFIAny& value, const GuardCheck& check) {
  if (value.type_index != kTVMFFITensor) return 0;
  const DLTensor* tensor = TVMFFITensorGetDLTensorPtr(value.v_obj);
  if (tensor->ndim != static_cast<int32_t>(check.values.size())) return 0;
  return std::memcmp(tensor->shape, check.values.data(), check.values.size() * sizeof(int64_t)) == 0;
}

// A shape tuple's dims (false with an exception set).
bool DimsOf(PyObject* shape, std::vector<int64_t>* out) {
  if (!PyTuple_Check(shape)) {
    PyErr_SetString(PyExc_TypeError, "a guard's shape must be a tuple of ints");
    return false;
  }
  for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shape); ++d) {
    out->push_back(PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d)));
    if (PyErr_Occurred()) return false;
  }
  return true;
}

// The tvm_ffi type index a Python type stands for (its __tvm_ffi_type_info__, when that is
// its own: tvm_ffi gives values of that index that very type), or -1 (the check compares
// Python types then).
int32_t TypeIndexOf(PyObject* type) {
  PyObject* info = PyObject_GetAttrString(type, "__tvm_ffi_type_info__");
  PyObject* owner = info == nullptr ? nullptr : PyObject_GetAttrString(info, "type_cls");
  PyObject* index = owner != type ? nullptr : PyObject_GetAttrString(info, "type_index");
  const long found = index == nullptr ? -1 : PyLong_AsLong(index);
  Py_XDECREF(index);
  Py_XDECREF(owner);
  Py_XDECREF(info);
  PyErr_Clear();
  return found >= 0 && found < INT32_MAX ? static_cast<int32_t>(found) : -1;
}

// One check of call_plans' tuple, compiled (false with an exception set).
bool CompileCheck(PyObject* check, GuardCheck* out, std::vector<Py_buffer>* cells) {
  const Py_ssize_t size = PyTuple_Check(check) ? PyTuple_GET_SIZE(check) : 0;
  out->kind = size >= 2 ? PyLong_AsLong(PyTuple_GET_ITEM(check, 0)) : -1;
  if (PyErr_Occurred()) return false;
  const Py_ssize_t want[] = {3, 3, 5, 3, 3, 2};
  if (out->kind < kArgType || out->kind > kRows || size != want[out->kind]) {
    PyErr_SetString(PyExc_TypeError, "a guard's check has an unknown kind or size");
    return false;
  }
  PyObject* where = PyTuple_GET_ITEM(check, 1);
  if (out->kind == kRows) {
    tvmdbg::Buffer pairs;
    if (!pairs.Get(where, "row checks")) return false;
    out->values.resize(pairs.size() / 8);
    std::memcpy(out->values.data(), pairs.data(), out->values.size() * 8);
    return true;
  }
  out->object = PyTuple_GET_ITEM(check, 2);
  if (out->kind == kOutType || out->kind == kOutShape) {
    if (!PyTuple_Check(where) || !DimsOf(where, &out->items)) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a guard's path must be a tuple of ints");
      return false;
    }
    out->path = where;
    if (out->kind == kOutType) out->type_index = TypeIndexOf(out->object);
    if (PyErr_Occurred()) return false;
  } else {
    out->arg = PyLong_AsSsize_t(where);
    if (PyErr_Occurred()) return false;
  }
  if (out->kind == kArgShape || out->kind == kOutShape) return DimsOf(out->object, &out->values);
  if (out->kind == kArgSame) {
    Py_buffer view;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(check, 3), &view, PyBUF_SIMPLE) != 0) return false;
    cells->push_back(view);
    if (view.len != sizeof(int64_t)) {
      PyErr_SetString(PyExc_TypeError, "a guard's generation cell must hold one int64");
      return false;
    }
    out->cell = static_cast<const int64_t*>(view.buf);
    out->generation = PyLong_AsLongLong(PyTuple_GET_ITEM(check, 4));
    return !PyErr_Occurred();
  }
  return true;
}

// A Guard of call_plans' tuple of checks (None: a static plan, always valid: None again); a
// new reference, nullptr with an exception set.
PyObject* CompileGuard(PyObject* source) {
  if (source == Py_None) {
    Py_INCREF(source);
    return source;
  }
  if (!PyTuple_Check(source)) {
    PyErr_SetString(PyExc_TypeError, "a guard must be a tuple of checks or None");
    return nullptr;
  }
  if (g_object_type == nullptr) {
    PyObject* core = PyImport_ImportModule("tvm_ffi.core");
    PyObject* type = core == nullptr ? nullptr : PyObject_GetAttrString(core, "CObject");
    Py_XDECREF(core);
    if (type == nullptr) return nullptr;
    if (!PyType_Check(type)) {
      Py_DECREF(type);
      PyErr_SetString(PyExc_TypeError, "tvm_ffi.core.CObject is not a type");
      return nullptr;
    }
    g_object_type = reinterpret_cast<PyTypeObject*>(type);  // held for the process
  }
  Guard* guard = PyObject_New(Guard, &kGuardType);
  if (guard == nullptr) return nullptr;
  Py_INCREF(source);
  guard->source = source;
  guard->checks = new std::vector<GuardCheck>(static_cast<size_t>(PyTuple_GET_SIZE(source)));
  guard->cells = new std::vector<Py_buffer>();
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(source); ++i) {
    if (!CompileCheck(PyTuple_GET_ITEM(source, i), &(*guard->checks)[i], guard->cells)) {
      Py_DECREF(guard);
      return nullptr;
    }
  }
  return reinterpret_cast<PyObject*>(guard);
}

// 1 when the value is the same objects as `same` (see kArgSame), 0 when not.
int SameObjects(PyObject* value, PyObject* same) {
  if (value == same) return 1;
  if (!PyTuple_Check(same) || !(PyList_Check(value) || PyTuple_Check(value))) return 0;
  const Py_ssize_t size = PySequence_Fast_GET_SIZE(value);
  if (size != PyTuple_GET_SIZE(same)) return 0;
  PyObject** items = PySequence_Fast_ITEMS(value);
  for (Py_ssize_t i = 0; i < size; ++i) {
    if (items[i] != PyTuple_GET_ITEM(same, i)) return 0;
  }
  return 1;
}

// The returned value at path (a new reference; nullptr with an exception set).
PyObject* Returned(PyObject* result, PyObject* path) {
  Py_INCREF(result);
  for (Py_ssize_t i = 0; result != nullptr && i < PyTuple_GET_SIZE(path); ++i) {
    PyObject* item = PySequence_GetItem(result, PyLong_AsSsize_t(PyTuple_GET_ITEM(path, i)));
    Py_DECREF(result);
    result = item;
  }
  return result;
}

// 1 when value's shape is the check's, 0 when not, -1 with an exception set. A tvm_ffi
// Tensor's from its DLTensor; anything else's `shape` read in Python.
int ShapeIs(PyObject* value, const GuardCheck& check) {
  static const std::vector<int64_t> kItself;
  TVMFFIAny found_value;
  if (ValueAt(value, kItself, &found_value) && found_value.type_index == kTVMFFITensor) {
    return DimsAre(found_value, check);
  }
  PyObject* found = PyObject_GetAttr(value, s_shape);
  if (found == nullptr) return -1;
  const int same = PyObject_RichCompareBool(found, check.object, Py_EQ);
  Py_DECREF(found);
  return same;
}

// 1 when the stats buffer (doubles of it) holds the pairs of a kRows check, else 0.
int RowsHold(const GuardCheck& check, const double* rows, size_t doubles) {
  for (size_t k = 0; k + 1 < check.values.size(); k += 2) {
    const int64_t at = check.values[k];
    if (at < 0 || static_cast<size_t>(at) >= doubles || rows[at] != static_cast<double>(check.values[k + 1])) return 0;
  }
  return 1;
}

// The call's arguments, result and stats buffer, as the checks read them.
struct Checked {
  PyObject* const* args;
  Py_ssize_t nargs;
  PyObject* result;
  const double* rows;
  size_t doubles;
};

// One check (see Check): 1 passes, 0 fails, -1 with an exception set.
int Holds(const GuardCheck& check, const Checked& call) {
  switch (check.kind) {
    case kRows:
      return RowsHold(check, call.rows, call.doubles);
    case kOutType:
    case kOutShape: {
      TVMFFIAny found;  // read in C when the result is tvm_ffi's
      if (ValueAt(call.result, check.items, &found)) {
        if (check.kind == kOutShape && found.type_index == kTVMFFITensor) return DimsAre(found, check);
        if (check.kind == kOutType && check.type_index >= 0) return found.type_index == check.type_index;
      }
      PyObject* value = Returned(call.result, check.path);
      if (value == nullptr) return -1;
      const int holds = check.kind == kOutType ? reinterpret_cast<PyObject*>(Py_TYPE(value)) == check.object
                                               : ShapeIs(value, check);
      Py_DECREF(value);
      return holds;
    }
    default:
      break;
  }
  if (check.arg < 0 || check.arg >= call.nargs) return 0;
  PyObject* arg = call.args[check.arg];
  switch (check.kind) {
    case kArgType:
      return reinterpret_cast<PyObject*>(Py_TYPE(arg)) == check.object;
    case kArgShape:
      return ShapeIs(arg, check);
    case kArgSame:
      return SameObjects(arg, check.object) && *check.cell == check.generation;
    default:
      return 0;
  }
}

// Whether a plan's guard passes for this call (None: a static plan): 1, 0, -1 with an
// exception set.
int Passes(PyObject* guard, const Checked& call) {
  if (guard == Py_None) return 1;
  for (const GuardCheck& check : *reinterpret_cast<Guard*>(guard)->checks) {
    const int holds = Holds(check, call);
    if (holds != 1) return holds;
  }
  return 1;
}

// -- after the VM returned -------------------------------------------------------------------------

// hooks._native_warn(the current exception): tvmdbg could not record the call. As
// CompiledTracer._safely, only an Exception becomes a warning: a KeyboardInterrupt or a
// SystemExit stays set and Warn returns false (the caller returns NULL to the user).
bool Warn(Tracer* tracer) {
  if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_Exception)) return false;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (value == nullptr) {
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return true;
  }
  PyObject* done = PyObject_CallMethodOneArg(tracer->hooks, s_native_warn, value);
  Py_XDECREF(type);
  Py_DECREF(value);
  Py_XDECREF(traceback);
  if (done == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return false;  // interrupted while warning
    PyErr_WriteUnraisable(tracer->hooks);
  }
  Py_XDECREF(done);
  return true;
}

// Whether the session's only busy sink is its writer (Session.serialized_execution_done's
// test); the writer, or None, as a new reference (nullptr on error).
PyObject* SoleWriter(PyObject* session) {
  PyObject* writer = PyObject_GetAttr(session, s_sole_writer);
  if (writer == nullptr || writer == Py_None) return writer;
  PyObject* checks = PyObject_GetAttr(session, s_idle_checks);
  if (checks == nullptr) {
    Py_DECREF(writer);
    return nullptr;
  }
  PyObject* fast = PySequence_Fast(checks, "_idle_checks");
  Py_DECREF(checks);
  if (fast == nullptr) {
    Py_DECREF(writer);
    return nullptr;
  }
  bool idle = true;
  for (Py_ssize_t k = 0; idle && k < PySequence_Fast_GET_SIZE(fast); ++k) {
    PyObject* answer = PyObject_CallNoArgs(PySequence_Fast_GET_ITEM(fast, k));
    const int truth = answer == nullptr ? -1 : PyObject_IsTrue(answer);
    Py_XDECREF(answer);
    if (truth < 0) {
      Py_DECREF(fast);
      Py_DECREF(writer);
      return nullptr;
    }
    idle = truth == 1;
  }
  Py_DECREF(fast);
  if (!idle) {
    Py_DECREF(writer);
    Py_RETURN_NONE;
  }
  return writer;
}

// A buffer back to this thread's pool: the native one (native: a PoolBuffer, else buffer: a
// (fid, tensor, array) tuple) once install_stats ran, else fast_tracer's (its _release).
bool Release(Tracer* tracer, PyObject* buffer, PoolBuffer* native, bool clean) {
  if (native != nullptr) {
    native->clean = clean == 1;
    ThisThreadPool()->free[native->fid].push_back(native);
    return true;
  }
  if (g_row_width > 0) {
    const long long fid = PyLong_AsLongLong(PyTuple_GET_ITEM(buffer, 0));
    PoolBuffer* wrapped = PyErr_Occurred() ? nullptr : Wrap(fid, PyTuple_GET_ITEM(buffer, 1), PyTuple_GET_ITEM(buffer, 2), clean);
    if (wrapped == nullptr) return false;
    ThisThreadPool()->free[fid].push_back(wrapped);
    return true;
  }
  PyObject* pool = PyObject_GetAttr(tracer->local, s_pool);
  if (pool == nullptr) return false;
  PyObject* fid = PyTuple_GET_ITEM(buffer, 0);
  PyObject* free = PyDict_GetItemWithError(pool, fid);
  bool ok = true;
  if (free != nullptr) {
    Py_INCREF(free);  // held: building the entry below may run the collector
  } else {
    ok = !PyErr_Occurred() && (free = PyList_New(0)) != nullptr && PyDict_SetItem(pool, fid, free) == 0;
  }
  PyObject* entry = ok ? PyTuple_Pack(3, PyTuple_GET_ITEM(buffer, 1), PyTuple_GET_ITEM(buffer, 2), clean ? Py_True : Py_False) : nullptr;
  ok = entry != nullptr && PyList_Append(free, entry) == 0;
  Py_XDECREF(entry);
  Py_XDECREF(free);
  Py_DECREF(pool);
  return ok;
}

// Whether the session's replay hunts for the run's first non-finite value (1, 0; -1 with an
// exception set).
int Hunting(PyObject* session) {
  PyObject* replay = PyObject_GetAttr(session, s_replay);
  if (replay == nullptr) return -1;
  int hunting = 0;
  if (replay != Py_None) {
    PyObject* flag = PyObject_GetAttr(replay, s_hunting);
    hunting = flag == nullptr ? -1 : PyObject_IsTrue(flag);
    Py_XDECREF(flag);
  }
  Py_DECREF(replay);
  return hunting;
}

// A call's records as Record has them: the Execution's constant bytes and per-call fields, and
// the traces' parts (call_rows' which and tails, each trace's middle bytes).
struct Records {
  tvmdbg::Bytes execution;
  const tvmdbg::ExecutionFields& fields;
  tvmdbg::Bytes which;
  tvmdbg::Bytes middle;
  tvmdbg::Bytes tails;
  PyObject* nonfinite;
};

// The records to the session's sole writer through native_records' C entry (no Python object
// made for them); false with an exception set.
bool QueueRecords(Tracer* tracer, PyObject* writer, const Plan& plan, const Records& records) {
  tvmdbg::QueuedCall call{};
  call.wall_time = Clock(CLOCK_REALTIME);
  call.execution = records.execution;
  call.fields = &records.fields;
  call.statics = plan.statics;
  call.which = records.which;
  call.middle = records.middle;
  call.tails = records.tails;
  call.width = PyLong_AsLongLong(plan.width);
  call.nonfinite = records.nonfinite;
  return !PyErr_Occurred() && tracer->queue(writer, call) == 0;
}

// The records to the session's sinks as Python objects (hooks._native_emit); false with an
// exception set.
bool EmitRecords(Tracer* tracer, const Plan& plan, const Records& records) {
  PyObject* made[4] = {Payload(records.execution, records.fields)};  // payload, which, middle, tails
  const tvmdbg::Bytes parts[3] = {records.which, records.middle, records.tails};
  for (int k = 0; k < 3 && made[k] != nullptr; ++k) {
    made[k + 1] = tvmdbg::RecycledBytes(parts[k].data, static_cast<Py_ssize_t>(parts[k].size));
  }
  PyObject* done = made[3] == nullptr ? nullptr
                                      : PyObject_CallMethodObjArgs(tracer->hooks, s_native_emit, made[0], plan.statics,
                                                                   made[1], made[2], made[3], plan.width,
                                                                   records.nonfinite, nullptr);
  for (PyObject* object : made) Py_XDECREF(object);
  Py_XDECREF(done);
  return done != nullptr;
}

enum class Outcome {
  kRecorded,     // written here (or, after the buffer went back to its pool, warned about)
  kPython,       // Python finishes the call (*rows set when call_rows ran); an Exception may be set
  kInterrupted,  // a KeyboardInterrupt or a SystemExit is set: it goes to the user
};

// The call's arguments and result, as Record reads them.
struct CallArgs {
  PyObject* const* args;
  Py_ssize_t nargs;
  PyObject* result;
};

// The call's one stats block: a native buffer's memory (native: a PoolBuffer of the native
// stats), else the array of the one (fid, tensor, array) of buffers (handed out by
// fast_tracer._stats; *buffer, its buffer held in view: writable when it can be, as call_rows
// takes it); false when the call has another number of buffers or another function's.
bool BlockOf(Function* function, PyObject* buffers, const PoolBuffer* native, tvmdbg::Buffer* view,
             PyObject** buffer, tvmdbg::RowsBlock* block) {
  if (native != nullptr) {
    if (PyList_GET_SIZE(buffers) != 0 || native->fid != function->fid) return false;
    *block = {reinterpret_cast<char*>(native->data), static_cast<size_t>(native->nrows * g_row_width) * sizeof(double),
              true};
    return true;
  }
  if (PyList_GET_SIZE(buffers) != 1) return false;
  *buffer = PyList_GET_ITEM(buffers, 0);
  if (!PyTuple_Check(*buffer) || PyTuple_GET_SIZE(*buffer) != 3 ||
      PyLong_AsLongLong(PyTuple_GET_ITEM(*buffer, 0)) != function->fid) {
    return false;
  }
  PyObject* array = PyTuple_GET_ITEM(*buffer, 2);
  const bool writable = view->Get(array, "block", true);
  if (!writable) {
    PyErr_Clear();
    if (!view->Get(array, "block")) return false;
  }
  *block = {view->mutable_data(), view->size(), writable};
  return true;
}

thread_local tvmdbg::RowsScratch t_scratch;
thread_local bool t_scratch_taken = false;

// Where a call's rows are written (native_rows' results stay there until its records are
// queued): this thread's scratch, or, for a call made while another's are still in use (a
// traced call from a finalizer run by the writer's Python calls), one of its own.
class ScratchLease {
 public:
  ScratchLease() : shared_(!t_scratch_taken) { t_scratch_taken = true; }
  ~ScratchLease() {
    if (shared_) t_scratch_taken = false;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  tvmdbg::RowsScratch* get() { return shared_ ? &t_scratch : &own_; }

 private:
  bool shared_;
  tvmdbg::RowsScratch own_;
};

// call_rows' 6-tuple of out, for Python to finish the call with; an exception already set
// stays the one set.
PyObject* RowsTuple(Tracer* tracer, const tvmdbg::RowsOut& out) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyObject* rows = tracer->rows->result(out);
  if (type != nullptr) {
    PyErr_Clear();
    PyErr_Restore(type, value, traceback);
  }
  return rows;
}

// The records of a call whose buffer is back in its pool (out: its rows), to the session's
// sole writer, else to its sinks through Python.
Outcome Write(Tracer* tracer, const Plan& plan, const tvmdbg::RowsOut& out, const Location& location,
              unsigned long long call_index, unsigned long long call_number, double start) {
  const tvmdbg::Bytes execution = plan.summaries != Py_None
                                      ? out.execution
                                      : tvmdbg::Bytes{PyBytes_AS_STRING(plan.execution),
                                                      static_cast<size_t>(PyBytes_GET_SIZE(plan.execution))};
  const tvmdbg::ExecutionFields fields{
      call_index, (Clock(CLOCK_MONOTONIC) - start) * 1e6,
      {PyBytes_AS_STRING(location.bytes), static_cast<size_t>(PyBytes_GET_SIZE(location.bytes))},
      static_cast<uint64_t>(out.which.size / 4), call_number};
  char middle[12] = {0x18};  // each trace's execution_index
  const tvmdbg::Bytes middle_bytes = {middle, static_cast<size_t>(tvmdbg::PutVarint64(middle + 1, call_index) - middle)};
  PyObject* nonfinite = out.nonfinite < 0 ? Py_None : out.nonfinite ? Py_True : Py_False;  // for the writer's tally
  const Records records{execution, fields, out.which, middle_bytes, out.tails, nonfinite};
  PyObject* writer = SoleWriter(tracer->session);
  const bool done = writer != nullptr && (writer != Py_None ? QueueRecords(tracer, writer, plan, records)
                                                             : EmitRecords(tracer, plan, records));
  Py_XDECREF(writer);
  if (!done) return Warn(tracer) ? Outcome::kRecorded : Outcome::kInterrupted;
  ++tracer->recorded;
  return Outcome::kRecorded;
}

// The common case's records, written; else what Python must do (*chosen: the plan call_rows'
// passes ran with, in plans; *rows: their result). The call's one buffer is native (a
// PoolBuffer of the native stats, set to nullptr once back in its pool) or the one (fid,
// tensor, array) of buffers (handed out by fast_tracer._stats).
Outcome Record(Function* function, const Plans& plans, const CallArgs& call, const Location& location, PyObject* index,
               PyObject* number, double start, PyObject* buffers, PoolBuffer** native, const Plan** chosen, PyObject** rows) {
  Tracer* tracer = function->tracer;
  PyObject* buffer = nullptr;
  tvmdbg::Buffer view;
  tvmdbg::RowsBlock block;
  if (!BlockOf(function, buffers, *native, &view, &buffer, &block)) return Outcome::kPython;
  const Checked checked{call.args, call.nargs, call.result, reinterpret_cast<const double*>(block.data),
                        block.size / sizeof(double)};
  *chosen = nullptr;
  for (int k = 0; k < plans.count && *chosen == nullptr; ++k) {
    const int passes = Passes(plans.plan[k].guard, checked);
    if (passes < 0) return Outcome::kPython;
    if (passes == 1) *chosen = &plans.plan[k];
  }
  if (*chosen == nullptr) return Outcome::kPython;
  const Plan& plan = **chosen;
  const unsigned long long call_index = PyLong_AsUnsignedLongLong(index);
  const unsigned long long call_number = PyLong_AsUnsignedLongLong(number);
  if (PyErr_Occurred()) return Outcome::kPython;
  const int hunting = plan.scan == Py_None ? 0 : Hunting(tracer->session);  // no scan: no health to hunt in
  if (hunting < 0) return Outcome::kPython;
  ScratchLease scratch;
  tvmdbg::RowsOut out{};
  if (tracer->rows->call(*plan.rows_plan, block, hunting == 1, true, scratch.get(), &out) != 0) return Outcome::kPython;
  const bool complete = plan.summaries != Py_None ? out.has_execution : PyBytes_Check(plan.execution);
  if (!complete || out.bad >= 0 || !Release(tracer, buffer, *native, out.cleared)) {
    *rows = RowsTuple(tracer, out);  // Python finishes the call (the replay, a row not written)
    return Outcome::kPython;
  }
  *native = nullptr;
  // From here the buffer is back in its pool: the call is never handed to Python again.
  return Write(tracer, plan, out, location, call_index, call_number, start);
}

// -- Function ------------------------------------------------------------------------------------

PyObject* Fallback(Function* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

// This thread's attributes of the tracer's threading.local (fast_tracer._LOCAL): its
// __dict__, one dict for the thread's life. `call` and `implicit` are plain attributes, so a
// call reads and sets them as that dict's items, a fraction of the cost of the local's
// attribute protocol (~60 ns an access). A new reference; nullptr with an exception set.
PyObject* ThreadAttributes(Tracer* tracer) {
  PyObject* attributes = PyObject_GetAttr(tracer->local, s_dict);
  if (attributes != nullptr && !PyDict_Check(attributes)) {
    Py_CLEAR(attributes);
    PyErr_SetString(PyExc_TypeError, "the tracer's thread-local __dict__ is not a dict");
  }
  return attributes;
}

// Whether this thread is inside a traced call or a time_evaluator run (-1: error): its `call`
// or `implicit` is not None (one this thread never set: the local's class default).
int Busy(Tracer* tracer, PyObject* attributes) {
  for (PyObject* name : {s_call, s_implicit}) {
    PyObject* value = PyDict_GetItemWithError(attributes, name);  // borrowed
    if (value == nullptr) {
      if (PyErr_Occurred()) return -1;
      value = PyObject_GetAttr(tracer->local, name);
      if (value == nullptr) return -1;
      Py_DECREF(value);  // compared only
    }
    if (value != Py_None) return 1;
  }
  return 0;
}

// _native_finish(name, function, index, call_number, start, buffers, args, result, error, stack,
// user_index, rows, plan): Python finishes the call (rows: call_rows' result with that plan, as
// learned: the very object, whatever was learned or forgotten since); false only for a
// BaseException.
bool FinishInPython(Function* self, PyObject* const* args, Py_ssize_t nargs, const Location& location,
                    PyObject* index, PyObject* number, double start, PyObject* buffers, PyObject* result, PyObject* error,
                    PyObject* rows, const Plan* chosen) {
  PyObject* arguments = PyTuple_New(nargs);
  PyObject* start_time = arguments == nullptr ? nullptr : PyFloat_FromDouble(start);
  if (start_time == nullptr) {
    Py_XDECREF(arguments);
    return Warn(self->tracer);
  }
  for (Py_ssize_t k = 0; k < nargs; ++k) {
    Py_INCREF(args[k]);
    PyTuple_SET_ITEM(arguments, k, args[k]);
  }
  PyObject* forwarded[14] = {self->tracer->hooks,
                             self->name,
                             self->function,
                             index,
                             number,
                             start_time,
                             buffers,
                             arguments,
                             result == nullptr ? Py_None : result,
                             error == nullptr ? Py_None : error,
                             location.stack,
                             location.user_index,
                             rows == nullptr ? Py_None : rows,
                             chosen == nullptr ? Py_None : chosen->described};
  PyObject* done =
      PyObject_VectorcallMethod(s_native_finish, forwarded, 14 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  Py_DECREF(start_time);
  Py_DECREF(arguments);
  Py_XDECREF(done);
  return done != nullptr || Warn(self->tracer);  // the hook catches every Exception (_safely)
}

// The user's call outcome dropped, the interrupt raised instead.
PyObject* Interrupted(PyObject* result, PyObject* type, PyObject* error, PyObject* traceback) {
  Py_XDECREF(result);
  Py_XDECREF(type);
  Py_XDECREF(error);
  Py_XDECREF(traceback);
  return nullptr;
}

// Execution.call_number of a call of the function `name`: the next of the VM's counter for it
// (an itertools.count in Tracer.call_numbers, which Python's calls draw from too); the first
// call of a function asks Python to make its counter (next_call_number).
PyObject* NextCallNumber(Tracer* tracer, PyObject* name) {
  PyObject* counter = PyDict_GetItemWithError(tracer->call_numbers, name);  // borrowed
  if (counter != nullptr) return PyIter_Next(counter);
  if (PyErr_Occurred()) return nullptr;
  return PyObject_CallMethodOneArg(tracer->hooks, s_next_call_number, name);
}

// The call traced, this thread not inside another (attributes: its ThreadAttributes).
PyObject* Traced(Function* self, PyObject* attributes, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Tracer* tracer = self->tracer;
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  Plans plans;
  Location location;
  if (!PlanOf(self, nargs, &plans) || plans.count == 0 || !Locate(tracer, &location)) {
    DropPlans(&plans);
    if (PyErr_Occurred() && !Warn(tracer)) return nullptr;
    return Fallback(self, args, nargsf, kwnames);
  }
  PyObject* index = PyIter_Next(tracer->ids);
  PyObject* number = index == nullptr ? nullptr : NextCallNumber(tracer, self->name);
  if (number == nullptr) Py_CLEAR(index);
  Marker* marker = index == nullptr ? nullptr : PyObject_New(Marker, &kMarkerType);
  if (marker != nullptr && (marker->buffers = PyList_New(0)) == nullptr) Py_CLEAR(marker);
  if (marker == nullptr || PyDict_SetItem(attributes, s_call, reinterpret_cast<PyObject*>(marker)) != 0) {
    Py_XDECREF(marker);
    Py_XDECREF(index);
    Py_XDECREF(number);
    DropPlans(&plans);
    DropLocation(&location);
    if (PyErr_Occurred() && !Warn(tracer)) return nullptr;
    return Fallback(self, args, nargsf, kwnames);
  }
  ThreadPool* pool = ThisThreadPool();
  const double start = Clock(CLOCK_MONOTONIC);
  ++pool->active;
  PyObject* result = PyObject_Vectorcall(self->function, args, nargsf, nullptr);
  --pool->active;
  PyObject *type = nullptr, *error = nullptr, *traceback = nullptr;
  if (result == nullptr) {
    PyErr_Fetch(&type, &error, &traceback);
    PyErr_NormalizeException(&type, &error, &traceback);
    if (traceback != nullptr && error != nullptr) PyException_SetTraceback(error, traceback);
  }
  bool interrupted = PyDict_SetItem(attributes, s_call, Py_None) != 0 && !Warn(tracer);
  PyObject* buffers = marker->buffers;
  Py_INCREF(buffers);
  Py_DECREF(marker);
  // The common call: one buffer, from the native stats. Any other: Python gets them all.
  PoolBuffer* native = pool->handed.size() == 1 ? pool->handed.back() : nullptr;
  if (native != nullptr) {
    pool->handed.clear();
  } else if (!HandOver(pool, buffers)) {
    interrupted = !Warn(tracer);
  }
  PyObject* rows = nullptr;
  const Plan* chosen = nullptr;  // in plans, which hold its references until the call ends
  Outcome outcome = Outcome::kPython;
  if (result != nullptr && !interrupted) {
    outcome =
        Record(self, plans, {args, nargs, result}, location, index, number, start, buffers, &native, &chosen, &rows);
    if (outcome == Outcome::kPython && PyErr_Occurred() && !Warn(tracer)) outcome = Outcome::kInterrupted;
    interrupted = outcome == Outcome::kInterrupted;
  }
  if (native != nullptr) {  // not recorded here: Python finishes the call with its buffer
    pool->handed.push_back(native);
    if (!HandOver(pool, buffers) && !Warn(tracer)) interrupted = true;
  }
  if (outcome == Outcome::kPython && !interrupted) {
    interrupted =
        !FinishInPython(self, args, nargs, location, index, number, start, buffers, result, error, rows, chosen);
  }
  Py_XDECREF(rows);
  Py_DECREF(buffers);
  Py_DECREF(index);
  Py_DECREF(number);
  DropPlans(&plans);
  DropLocation(&location);
  if (interrupted) return Interrupted(result, type, error, traceback);  // it wins over the call's outcome
  if (result == nullptr) {
    PyErr_Restore(type, error, traceback);
    return nullptr;
  }
  return result;
}

PyObject* Call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Function* self = reinterpret_cast<Function*>(callable);
  Tracer* tracer = self->tracer;
  if (tracer == nullptr || self->function == nullptr || self->fallback == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "tvmdbg: this traced VM function was released with its session");
    return nullptr;
  }
  if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) return Fallback(self, args, nargsf, kwnames);
  PyObject* attributes = ThreadAttributes(tracer);
  const int busy = attributes == nullptr ? -1 : Busy(tracer, attributes);
  if (busy != 0) {
    Py_XDECREF(attributes);
    if (busy < 0 && !Warn(tracer)) return nullptr;
    return Fallback(self, args, nargsf, kwnames);
  }
  PyObject* result = Traced(self, attributes, args, nargsf, kwnames);
  Py_DECREF(attributes);
  return result;
}

int FunctionTraverse(PyObject* object, visitproc visit, void* arg) {
  Function* self = reinterpret_cast<Function*>(object);
  Py_VISIT(self->tracer);
  Py_VISIT(self->function);
  Py_VISIT(self->fallback);
  return 0;
}

int FunctionClear(PyObject* object) {
  Function* self = reinterpret_cast<Function*>(object);
  Py_CLEAR(self->tracer);
  Py_CLEAR(self->function);
  Py_CLEAR(self->fallback);
  return 0;
}

void FunctionDealloc(PyObject* object) {
  PyObject_GC_UnTrack(object);
  FunctionClear(object);
  Py_CLEAR(reinterpret_cast<Function*>(object)->name);
  Py_TYPE(object)->tp_free(object);
}

PyObject* FunctionGetattr(PyObject* object, PyObject* name) {
  PyObject* found = PyObject_GenericGetAttr(object, name);
  if (found != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return found;
  PyErr_Clear();  // the rest is the VM function's (as TracedFunction.__getattr__)
  PyObject* function = reinterpret_cast<Function*>(object)->function;
  if (function == nullptr) {
    PyErr_SetObject(PyExc_AttributeError, name);
    return nullptr;
  }
  return PyObject_GetAttr(function, name);
}

// -- Tracer ----------------------------------------------------------------------------------------

void ClearCaches(Tracer* self) {
  // Emptied before any reference is dropped: a deallocation may run Python code (a weakref
  // callback on a code object) that calls a traced function and reads or fills the caches.
  std::unordered_map<Key, Location, KeyHash> locations;
  std::unordered_map<long long, Plans> plans;
  if (self->locations != nullptr) locations.swap(*self->locations);
  if (self->plans != nullptr) plans.swap(*self->plans);
  for (auto& item : locations) DropLocation(&item.second);
  for (auto& item : plans) DropPlans(&item.second);
}

PyObject* TracerNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *hooks, *local, *ids, *session, *call_numbers, *call_rows, *queue_call;
  static const char* names[] = {"hooks", "local", "ids", "session", "call_numbers", "call_rows", "queue_call", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOO:Tracer", const_cast<char**>(names), &hooks, &local, &ids,
                                   &session, &call_numbers, &call_rows, &queue_call)) {
    return nullptr;
  }
  if (!PyDict_Check(call_numbers)) {
    PyErr_SetString(PyExc_TypeError, "Tracer: call_numbers must be a dict");
    return nullptr;
  }
  if (!PyCapsule_IsValid(call_rows, tvmdbg::kCallRowsCapsule)) {
    PyErr_SetString(PyExc_TypeError, "Tracer: call_rows must be native_rows.CALL_ROWS");
    return nullptr;
  }
  if (!PyCapsule_IsValid(queue_call, tvmdbg::kQueueCallCapsule)) {
    PyErr_SetString(PyExc_TypeError, "Tracer: queue_call must be native_records.QUEUE_CALL");
    return nullptr;
  }
  auto rows = static_cast<const tvmdbg::CallRowsEntry*>(PyCapsule_GetPointer(call_rows, tvmdbg::kCallRowsCapsule));
  auto queue = reinterpret_cast<tvmdbg::QueueCallFunction>(PyCapsule_GetPointer(queue_call, tvmdbg::kQueueCallCapsule));
  Tracer* self = reinterpret_cast<Tracer*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->rows = rows;
  self->queue = queue;
  for (PyObject* object : {hooks, local, ids, session, call_numbers, call_rows, queue_call}) Py_INCREF(object);
  self->hooks = hooks;
  self->local = local;
  self->ids = ids;
  self->session = session;
  self->call_numbers = call_numbers;
  self->call_rows = call_rows;
  self->queue_call = queue_call;
  self->locations = new std::unordered_map<Key, Location, KeyHash>();
  self->plans = new std::unordered_map<long long, Plans>();
  self->recorded = 0;
  return reinterpret_cast<PyObject*>(self);
}

int TracerTraverse(PyObject* object, visitproc visit, void* arg) {
  Tracer* self = reinterpret_cast<Tracer*>(object);
  Py_VISIT(self->hooks);
  Py_VISIT(self->local);
  Py_VISIT(self->ids);
  Py_VISIT(self->session);
  Py_VISIT(self->call_numbers);
  Py_VISIT(self->call_rows);
  Py_VISIT(self->queue_call);
  return 0;
}

int TracerClear(PyObject* object) {
  Tracer* self = reinterpret_cast<Tracer*>(object);
  Py_CLEAR(self->hooks);
  Py_CLEAR(self->local);
  Py_CLEAR(self->ids);
  Py_CLEAR(self->session);
  Py_CLEAR(self->call_numbers);
  Py_CLEAR(self->call_rows);
  Py_CLEAR(self->queue_call);
  ClearCaches(self);
  return 0;
}

void TracerDealloc(PyObject* object) {
  Tracer* self = reinterpret_cast<Tracer*>(object);
  PyObject_GC_UnTrack(object);
  TracerClear(object);
  delete self->locations;
  delete self->plans;
  Py_TYPE(object)->tp_free(object);
}

// bind(name, fid, function, fallback) -> a Function calling function traced.
PyObject* TracerBind(PyObject* object, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyUnicode_Check(args[0]) || !PyLong_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "bind(name: str, fid: int, function, fallback)");
    return nullptr;
  }
  const long long fid = PyLong_AsLongLong(args[1]);
  if (fid == -1 && PyErr_Occurred()) return nullptr;
  if (fid < 0 || fid >= (1LL << 40)) {
    PyErr_SetString(PyExc_ValueError, "bind: fid out of range");
    return nullptr;
  }
  Function* bound = PyObject_GC_New(Function, &kFunctionType);
  if (bound == nullptr) return nullptr;
  bound->vectorcall = Call;
  bound->tracer = reinterpret_cast<Tracer*>(object);
  bound->name = args[0];
  bound->function = args[2];
  bound->fallback = args[3];
  bound->fid = fid;
  for (PyObject* held : {object, args[0], args[2], args[3]}) Py_INCREF(held);
  PyObject_GC_Track(bound);
  return reinterpret_cast<PyObject*>(bound);
}

// clear(): drops the cached locations and plans (the tests' and the benchmarks' reset).
PyObject* TracerClearCaches(PyObject* object, PyObject*) {
  ClearCaches(reinterpret_cast<Tracer*>(object));
  Py_RETURN_NONE;
}

// The key of (fid, nargs) in Tracer.plans (false with an exception set).
bool PlanKey(PyObject* const* args, long long* key) {
  const long long fid = PyLong_AsLongLong(args[0]);
  const long long nargs = PyLong_AsLongLong(args[1]);
  if (PyErr_Occurred()) return false;
  if (fid < 0 || fid >= (1LL << 40) || nargs < 0 || nargs >= (1 << 20)) {
    PyErr_SetString(PyExc_ValueError, "plan key out of range");
    return false;
  }
  *key = fid << 20 | nargs;
  return true;
}

// learn(fid, nargs, plan) -> bool: a plan with a guard for (fid, nargs), after its others
// (False: it has kMaxVariants already).
PyObject* TracerLearn(PyObject* object, PyObject* const* args, Py_ssize_t nargs) {
  long long key;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "learn(fid, nargs, plan)");
    return nullptr;
  }
  if (!PlanKey(args, &key)) return nullptr;
  Plans& plans = (*reinterpret_cast<Tracer*>(object)->plans)[key];
  if (plans.count >= kMaxVariants) Py_RETURN_FALSE;
  if (!PlanFrom(args[2], reinterpret_cast<Tracer*>(object)->rows, &plans.plan[plans.count])) return nullptr;
  ++plans.count;
  Py_RETURN_TRUE;
}

// forget(fid, nargs): drops the plans of (fid, nargs) (asked of _native_plan again).
PyObject* TracerForget(PyObject* object, PyObject* const* args, Py_ssize_t nargs) {
  long long key;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "forget(fid, nargs)");
    return nullptr;
  }
  if (!PlanKey(args, &key)) return nullptr;
  auto* map = reinterpret_cast<Tracer*>(object)->plans;
  auto found = map->find(key);
  if (found != map->end()) {
    Plans dropped = found->second;  // out of the map before any reference goes (ClearCaches)
    map->erase(found);
    DropPlans(&dropped);
  }
  Py_RETURN_NONE;
}

PyObject* TracerCounts(PyObject* object, PyObject*) {
  Tracer* self = reinterpret_cast<Tracer*>(object);
  return Py_BuildValue("(nnK)", static_cast<Py_ssize_t>(self->locations->size()),
                       static_cast<Py_ssize_t>(self->plans->size()), self->recorded);
}

PyMethodDef kTracerMethods[] = {
    {"bind", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(TracerBind)), METH_FASTCALL,
     "bind(name, fid, function, fallback) -> the function, traced"},
    {"clear", TracerClearCaches, METH_NOARGS, "clear(): forgets the cached call points and plans"},
    {"learn", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(TracerLearn)), METH_FASTCALL,
     "learn(fid, nargs, plan) -> bool: a plan with a guard for (fid, nargs)"},
    {"forget", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(TracerForget)), METH_FASTCALL,
     "forget(fid, nargs): drops the plans of (fid, nargs)"},
    {"counts", TracerCounts, METH_NOARGS, "counts() -> (call points cached, plans cached, calls recorded here)"},
    {nullptr, nullptr, 0, nullptr},
};

// -- Marker ------------------------------------------------------------------------------------------

void MarkerDealloc(PyObject* object) {
  Py_XDECREF(reinterpret_cast<Marker*>(object)->buffers);
  Py_TYPE(object)->tp_free(object);
}

PyObject* MarkerBuffers(PyObject* object, void*) {
  PyObject* buffers = reinterpret_cast<Marker*>(object)->buffers;
  Py_INCREF(buffers);
  return buffers;
}

PyObject* MarkerSkips(PyObject*, void*) { return PyTuple_New(0); }
PyObject* MarkerFid(PyObject*, void*) { return PyLong_FromLong(0); }
PyObject* MarkerImplicit(PyObject*, void*) { Py_RETURN_FALSE; }

PyGetSetDef kMarkerGetSet[] = {
    {"buffers", MarkerBuffers, nullptr, "(fid, tensor, array) of each buffer handed out", nullptr},
    {"skips", MarkerSkips, nullptr, "no parameter rows are skipped on this path", nullptr},
    {"fid", MarkerFid, nullptr, "no skipping function", nullptr},
    {"implicit", MarkerImplicit, nullptr, "never a time_evaluator repetition", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject kTracerType = {PyVarObject_HEAD_INIT(nullptr, 0) "native_call.Tracer"};
PyTypeObject kGuardType = {PyVarObject_HEAD_INIT(nullptr, 0) "native_call.Guard"};
PyTypeObject kFunctionType = {PyVarObject_HEAD_INIT(nullptr, 0) "native_call.Function"};
PyTypeObject kMarkerType = {PyVarObject_HEAD_INIT(nullptr, 0) "native_call.Marker"};

PyMethodDef kModuleMethods[] = {
    {"install_stats", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(InstallStats)), METH_FASTCALL,
     "install_stats(python_stats, new_buffer, row_width): serve tvmdbg.stats from the native pool"},
    {"take", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Take)), METH_FASTCALL,
     "take(fid, nrows) -> (tensor, array, clean) from this thread's pool, or None"},
    {"release", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(ReleaseToPool)), METH_FASTCALL,
     "release(fid, tensor, array, clean): back into this thread's pool"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "native_call", "The compiled tracer's VM call in C++.", -1,
                       kModuleMethods};

bool Intern() {
  const tvmdbg::InternedName names[] = {
      {&s_call, "call"},
      {&s_implicit, "implicit"},
      {&s_dict, "__dict__"},
      {&s_pool, "pool"},
      {&s_replay, "replay"},
      {&s_hunting, "hunting"},
      {&s_sole_writer, "_sole_writer"},
      {&s_idle_checks, "_idle_checks"},
      {&s_native_location, "_native_location"},
      {&s_native_plan, "_native_plan"},
      {&s_native_finish, "_native_finish"},
      {&s_next_call_number, "next_call_number"},
      {&s_native_emit, "_native_emit"},
      {&s_native_warn, "_native_warn"},
      {&s_shape, "shape"},
      };
  return tvmdbg::InternAll(names);
}

}  // namespace

PyMODINIT_FUNC PyInit_native_call() {
  if (!Intern()) return nullptr;
  kTracerType.tp_basicsize = sizeof(Tracer);
  kTracerType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  kTracerType.tp_doc =
      "Tracer(hooks, local, ids, session, call_rows, queue_call): a CompiledTracer's native call path (call_rows: "
      "native_rows.CALL_ROWS, queue_call: native_records.QUEUE_CALL)";
  kTracerType.tp_new = TracerNew;
  kTracerType.tp_dealloc = TracerDealloc;
  kTracerType.tp_traverse = TracerTraverse;
  kTracerType.tp_clear = TracerClear;
  kTracerType.tp_methods = kTracerMethods;

  kFunctionType.tp_basicsize = sizeof(Function);
  kFunctionType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC;
  kFunctionType.tp_traverse = FunctionTraverse;
  kFunctionType.tp_clear = FunctionClear;
  kFunctionType.tp_doc = "A VM function traced by the native call path (Tracer.bind)";
  kFunctionType.tp_vectorcall_offset = offsetof(Function, vectorcall);
  kFunctionType.tp_call = PyVectorcall_Call;
  kFunctionType.tp_dealloc = FunctionDealloc;
  kFunctionType.tp_getattro = FunctionGetattr;

  kMarkerType.tp_basicsize = sizeof(Marker);
  kMarkerType.tp_flags = Py_TPFLAGS_DEFAULT;
  kMarkerType.tp_doc = "The current call as fast_tracer._stats sees it";
  kMarkerType.tp_dealloc = MarkerDealloc;
  kMarkerType.tp_getset = kMarkerGetSet;

  kGuardType.tp_basicsize = sizeof(Guard);
  kGuardType.tp_flags = Py_TPFLAGS_DEFAULT;
  kGuardType.tp_doc = "A learned plan's guard, compiled";
  kGuardType.tp_dealloc = GuardDealloc;

  if (PyType_Ready(&kTracerType) < 0 || PyType_Ready(&kFunctionType) < 0 || PyType_Ready(&kMarkerType) < 0 ||
      PyType_Ready(&kGuardType) < 0) {
    return nullptr;
  }
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  Py_INCREF(&kTracerType);
  if (PyModule_AddObject(module, "Tracer", reinterpret_cast<PyObject*>(&kTracerType)) < 0) {
    Py_DECREF(&kTracerType);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
