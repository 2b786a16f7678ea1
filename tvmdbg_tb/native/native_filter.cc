// The VM instrument's native pre-filter (see native_filter.py).
//
// The Relax VM calls its instrument before and after every call instruction, builtins
// included. Most of those calls are VM builtins (vm.builtin.alloc_tensor, null_value, ...)
// that the Python tracer ignores after one set lookup, yet each still pays the conversion
// of its arguments to Python objects. This filter is the VM's instrument instead: it keeps,
// per thread, the symbols the running Relax function's tracer wants (its kernel sites and
// the nested functions) and forwards only those calls to the Python callback. A skipped
// call started and not returned is remembered (the builtin to name if the VM call raises).
#include <tvm/ffi/any.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>
#include <tvm/ffi/string.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

using tvm::ffi::Any;
using tvm::ffi::AnyView;
using tvm::ffi::Array;
using tvm::ffi::Function;
using tvm::ffi::Optional;
using tvm::ffi::PackedArgs;
using tvm::ffi::String;

constexpr int64_t kIdle = -2;  // no traced call on this thread: answer 0, forward nothing
constexpr int64_t kAll = -1;   // forward every call (an unmapped function, a call starting)

struct SymbolSet {
  std::vector<std::string> names;  // owns the characters the index points at; never resized
  std::unordered_set<std::string_view> index;
};

struct ThreadState {
  const SymbolSet* active = nullptr;  // null with mode kAll
  int64_t mode = kIdle;               // kIdle, kAll, or >= 0 (a set is active)
  bool stop = false;                  // the tracer skips the remaining kernels: it sees them all
  bool has_builtin = false;
  std::string builtin;                // a skipped builtin that started and did not return
  bool has_kernel = false;            // a kernel whose start was taken here, not returned
  std::string kernel;
  std::chrono::steady_clock::time_point start;
};

struct Filter {
  int64_t id;
  Function callback;   // the tracer's instrument: (callee, symbol, before, ret, *args)
  Function on_kernel;  // a kernel returned: (None, symbol, duration_us, ret, *args)
  SymbolSet functions;  // the Relax functions (nested calls): always the tracer's
  std::mutex mutex;             // guards sets (appended from Python)
  std::deque<SymbolSet> sets;   // a deque: appending never moves an existing set
};

std::mutex registry_mutex;
std::unordered_map<int64_t, std::weak_ptr<Filter>> registry;  // the VM owns the filter
std::atomic<int64_t> next_id{1};

ThreadState& StateOf(int64_t id) {
  thread_local std::unordered_map<int64_t, ThreadState> states;
  thread_local int64_t last_id = 0;
  thread_local ThreadState* last = nullptr;
  if (last_id != id || last == nullptr) {
    last = &states[id];  // node-based map: the reference stays valid
    last_id = id;
  }
  return *last;
}

std::shared_ptr<Filter> Find(int64_t id) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry.find(id);
  if (it == registry.end()) return nullptr;
  auto filter = it->second.lock();
  if (!filter) registry.erase(it);
  return filter;
}

void Forward(const Function& callback, PackedArgs args, AnyView before, Any* rv);

void Run(const std::shared_ptr<Filter>& filter, PackedArgs args, Any* rv) {
  ThreadState& state = StateOf(filter->id);
  if (state.mode == kIdle) {
    *rv = static_cast<int64_t>(0);
    return;
  }
  if (state.active != nullptr && args.size() >= 4) {
    Optional<String> symbol = args[1].try_cast<String>();
    Optional<bool> before = args[2].try_cast<bool>();
    if (symbol.has_value() && before.has_value()) {
      const String& name = symbol.value();
      std::string_view view(name.data(), name.size());
      if (state.active->index.find(view) == state.active->index.end()) {
        // A builtin: remembered while it runs (named if it raises), never forwarded.
        state.has_builtin = before.value();
        if (before.value()) state.builtin.assign(view.data(), view.size());
        *rv = static_cast<int64_t>(0);
        return;
      }
      if (filter->functions.index.find(view) == filter->functions.index.end()) {
        // A kernel site of a mapped function: its start is taken here, its end forwarded
        // with the duration (unless the tracer is stopping: then it sees both).
        if (before.value() && !state.stop) {
          state.has_kernel = true;
          state.kernel.assign(view.data(), view.size());
          state.start = std::chrono::steady_clock::now();
          *rv = static_cast<int64_t>(0);
          return;
        }
        if (!before.value() && state.has_kernel) {
          double duration = std::chrono::duration<double, std::micro>(
                                std::chrono::steady_clock::now() - state.start)
                                .count();
          state.has_kernel = false;
          Forward(filter->on_kernel, args, AnyView(duration), rv);
          return;
        }
      }
    }
  }
  Forward(filter->callback, args, args.size() > 2 ? args[2] : AnyView(), rv);
}

// Calls callback with args, the callee object (args[0], never read by the tracer) as None
// (sparing its Python wrapper) and args[2] replaced by `before`.
void Forward(const Function& callback, PackedArgs args, AnyView before, Any* rv) {
  constexpr int kInline = 16;
  int n = args.size();
  AnyView inline_args[kInline];
  std::vector<AnyView> heap_args;
  AnyView* forwarded = inline_args;
  if (n > kInline) {
    heap_args.resize(n);
    forwarded = heap_args.data();
  }
  for (int i = 1; i < n; ++i) forwarded[i] = args[i];
  if (n > 0) forwarded[0] = AnyView(nullptr);
  if (n > 2) forwarded[2] = before;
  callback.CallPacked(forwarded, n, rv);
}

}  // namespace

// A new filter forwarding to callback: [its id (the handle Python steers it with), the
// instrument function to hand to the VM]. Only that function owns the filter.
Array<Any> filter_create(Function callback, Function on_kernel, Array<String> functions) {
  auto filter = std::make_shared<Filter>();
  filter->id = next_id.fetch_add(1);
  filter->callback = std::move(callback);
  filter->on_kernel = std::move(on_kernel);
  for (const String& name : functions) filter->functions.names.emplace_back(name.data(), name.size());
  for (const std::string& name : filter->functions.names) filter->functions.index.emplace(name);
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry[filter->id] = filter;
  }
  Function instrument =
      Function::FromPacked([filter](PackedArgs args, Any* rv) { Run(filter, args, rv); });
  return Array<Any>{Any(filter->id), Any(instrument)};
}

// Registers a set of symbols; returns its number for filter_enter/filter_activate.
int64_t filter_add_set(int64_t id, Array<String> names) {
  std::shared_ptr<Filter> filter = Find(id);
  if (filter == nullptr) return kAll;
  std::lock_guard<std::mutex> lock(filter->mutex);
  SymbolSet& set = filter->sets.emplace_back();
  set.names.reserve(names.size());
  for (const String& name : names) set.names.emplace_back(name.data(), name.size());
  for (const std::string& name : set.names) set.index.emplace(name);
  return static_cast<int64_t>(filter->sets.size()) - 1;
}

void Activate(int64_t id, int64_t mode, bool fresh) {
  std::shared_ptr<Filter> filter = Find(id);
  if (filter == nullptr) return;
  ThreadState& state = StateOf(id);
  const SymbolSet* active = nullptr;
  if (mode >= 0) {
    std::lock_guard<std::mutex> lock(filter->mutex);
    if (mode < static_cast<int64_t>(filter->sets.size())) {
      active = &filter->sets[mode];
    } else {
      mode = kAll;
    }
  }
  state.mode = mode;
  state.active = active;
  if (fresh) {
    state.has_builtin = false;
    state.has_kernel = false;
    state.stop = false;
  }
}

// A traced call starts on this thread with set `mode` (or kAll/kIdle): what started is forgotten.
void filter_enter(int64_t id, int64_t mode) { Activate(id, mode, true); }

// The running Relax function changed (a nested function was entered or returned).
void filter_activate(int64_t id, int64_t mode) { Activate(id, mode, false); }

// The builtin the Python callback itself skipped (or none).
void filter_note(int64_t id, Optional<String> builtin) {
  ThreadState& state = StateOf(id);
  state.has_builtin = builtin.has_value();
  state.builtin = builtin.has_value() ? std::string(builtin.value().data(), builtin.value().size())
                                     : std::string();
}

// The tracer stops the call: it sees every remaining kernel start (to skip it).
void filter_stop(int64_t id) { StateOf(id).stop = true; }

// What started and did not return on this thread: [the builtin or None, the kernel or None].
Array<Any> filter_started(int64_t id) {
  ThreadState& state = StateOf(id);
  Any builtin = state.has_builtin ? Any(String(state.builtin)) : Any(nullptr);
  Any kernel = state.has_kernel ? Any(String(state.kernel)) : Any(nullptr);
  return Array<Any>{builtin, kernel};
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(filter_create, filter_create);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(filter_add_set, filter_add_set);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(filter_enter, filter_enter);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(filter_activate, filter_activate);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(filter_note, filter_note);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(filter_stop, filter_stop);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(filter_started, filter_started);
