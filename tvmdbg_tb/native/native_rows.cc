// A compiled function's stats rows turned into record bytes, in C++ (see native_rows.py):
// each kernel's trace tail (debug_values and duration_us), the health-mode Execution's
// summaries, and the first non-finite row, for one call in one CPython call each, without
// numpy's fixed cost per operation. The bytes are fast_tracer's Python loops', double for
// double (no contraction; counts are whole numbers, so sums are exact in any order).
// native_call runs the same passes through the C entry CALL_ROWS (call_rows.h), on a plan read
// once: one implementation for both paths.
#include "call_rows.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace {

using tvmdbg::Buffer;
using tvmdbg::Bytes;
using tvmdbg::RecycledBytes;
using tvmdbg::RowsBlock;
using tvmdbg::RowsOut;
using tvmdbg::RowsPlan;
using tvmdbg::RowsScratch;
using tvmdbg::ScanPlan;
using tvmdbg::SummariesPlan;
using tvmdbg::TailsPlan;

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

// -- a call's plan: its constants, read and checked once ----------------------------------------

constexpr const char kTailsMismatch[] = "trace_tails: the arguments do not describe the stats rows";
constexpr const char kSummariesMismatch[] = "summaries: the template does not describe the stats rows";
constexpr const char kScanMismatch[] = "first_nonfinite: the arguments do not describe the stats rows";
constexpr const char kCallRowsUsage[] =
    "call_rows(block, tails: 7-tuple, summaries: 8-tuple | None, scan: 3-tuple | None, clear)";

// The buffers of a plan's Python arguments, held while a RowsPlan points into them.
struct Views {
  Buffer traced, codes, tmpl, offsets, starts, members, summary_codes, totals, health;
};

Bytes MemoryOf(const Buffer& buffer) { return {buffer.data(), buffer.size()}; }

uint32_t U32(const Bytes& span, size_t index) {
  uint32_t value;
  std::memcpy(&value, span.data + 4 * index, 4);
  return value;
}

// Whether the block holds rows rows of width doubles (else a ValueError saying mismatch);
// rows >= 1 and width >= 8 (checked with the plan). Divided, not multiplied: rows * width * 8
// of any int64 width could wrap and pass, and then every row's offset is below block_size.
bool Fits(size_t block_size, long long rows, long long width, const char* mismatch) {
  if (static_cast<size_t>(rows) <= block_size / 8 / static_cast<size_t>(width)) return true;
  PyErr_SetString(PyExc_ValueError, mismatch);
  return false;
}

// trace_tails' arguments after the block: (rows, row_width, traced, count, codes,
// stats_column, rate)
//   block: the stats buffer (float64, row-major, row_width columns); rows 1..rows-1 are
//     kernel rows (row 0: the call's start), a row ran when its column 0 (cycles) is set;
//   traced: one byte per kernel row, nonzero when the row has a trace;
//   count: debug values per trace: 0 (duration only), 1 CURT, 4 CONCISE, 10 FULL_HEALTH,
//     15 FULL_STATS (the 10 plus columns stats_column..+4); codes: a float64 dtype code
//     per kernel row (FULL_HEALTH, FULL_STATS).
// False with an exception set when they describe no stats rows.
bool TailsFrom(PyObject* const* args, Views* views, TailsPlan* plan) {
  if (!views->traced.Get(args[2], "traced") || !views->codes.Get(args[4], "codes")) return false;
  plan->rows = PyLong_AsLongLong(args[0]);
  plan->width = PyLong_AsLongLong(args[1]);
  plan->count = PyLong_AsLongLong(args[3]);
  plan->stats = PyLong_AsLongLong(args[5]);
  plan->rate = PyFloat_AsDouble(args[6]);
  if (PyErr_Occurred()) return false;
  plan->traced = MemoryOf(views->traced);
  plan->codes = MemoryOf(views->codes);
  const long long rows = plan->rows, count = plan->count;
  const bool health = count == 1 || count == 4 || count == 10 || count == 15;
  if (rows < 1 || plan->width < 8 || (count != 0 && !health) || plan->traced.size < static_cast<size_t>(rows - 1) ||
      (count >= 10 && plan->codes.size < static_cast<size_t>(rows - 1) * 8) ||
      (count == 15 && (plan->stats < 0 || plan->stats > plan->width - 5))) {  // its five columns in the row
    PyErr_SetString(PyExc_ValueError, kTailsMismatch);
    return false;
  }
  return true;
}

// Each traced row that ran (u32 row - 1 each) and its tail, end to end, into scratch (out's
// which and tails); *nonfinite set when a traced row's counts hold a NaN or an Inf.
void TailsInto(const TailsPlan& plan, const char* base, bool* nonfinite, RowsScratch* scratch, RowsOut* out) {
  const long long rows = plan.rows, width = plan.width, count = plan.count;
  const size_t tail_size = count ? 2 + 8 * count + 9 : 9;
  scratch->which.resize(static_cast<size_t>(4 * (rows - 1)));
  scratch->tails.resize(tail_size * static_cast<size_t>(rows - 1));
  char* which = scratch->which.data();
  char* tails = scratch->tails.data();
  double previous = At(base, 0);
  for (long long r = 1; r < rows; ++r) {
    const char* row = base + 8 * r * width;
    const double cycles = At(row, 0);
    if (cycles == 0.0) continue;  // did not run
    const double duration = (cycles - previous) / plan.rate;
    previous = cycles;
    if (!plan.traced.data[r - 1]) continue;
    const uint32_t k = static_cast<uint32_t>(r - 1);
    std::memcpy(which, &k, 4);
    which += 4;
    if (count) {
      Counts counts;
      counts.Add(row);
      if (counts.Nonfinite()) *nonfinite = true;
      *tails++ = 0x42;  // debug_values, packed
      *tails++ = static_cast<char>(8 * count);
      const double code = count >= 10 ? At(plan.codes.data, r - 1) : 0.0;
      tails = PutValues(tails, counts, count > 10 ? 10 : count, code, counts.rank);
      if (count == 15) {
        for (long long c = 0; c < 5; ++c) tails = PutDouble(tails, At(row, plan.stats + c));
      }
    }
    *tails++ = 0x59;  // duration_us, a double
    tails = PutDouble(tails, duration);
  }
  out->which = {scratch->which.data(), static_cast<size_t>(which - scratch->which.data())};
  out->tails = {scratch->tails.data(), static_cast<size_t>(tails - scratch->tails.data())};
}

// summaries' arguments without the block: (template, offsets, starts, members, codes,
// totals, count, row_width): execution_template's Execution bytes are a copy of template
// with, at byte offsets[b], block b's `count` debug values (1, 4 or 10) from the sum of the
// buffer rows members[starts[b]:starts[b + 1]] (u32 each); codes[b] its dtype code (f64),
// totals[b] bit 0 set for a tuple's totals (rank 0), bit 1 for an output's summary (whose
// NaN or Inf the writer counts). False with an exception set when they describe no template.
bool SummariesFrom(PyObject* const* args, Views* views, SummariesPlan* plan) {
  if (!views->tmpl.Get(args[0], "template") || !views->offsets.Get(args[1], "offsets") ||
      !views->starts.Get(args[2], "starts") || !views->members.Get(args[3], "members") ||
      !views->summary_codes.Get(args[4], "codes") || !views->totals.Get(args[5], "totals")) {
    return false;
  }
  plan->count = PyLong_AsLongLong(args[6]);
  plan->width = PyLong_AsLongLong(args[7]);
  if (PyErr_Occurred()) return false;
  plan->tmpl = MemoryOf(views->tmpl), plan->offsets = MemoryOf(views->offsets), plan->starts = MemoryOf(views->starts);
  plan->members = MemoryOf(views->members), plan->codes = MemoryOf(views->summary_codes);
  plan->totals = MemoryOf(views->totals);
  const long long count = plan->count;
  const size_t blocks = plan->blocks = plan->offsets.size / 4;
  const size_t num_members = plan->num_members = plan->members.size / 4;
  bool valid = (count == 1 || count == 4 || count == 10) && plan->width >= 8 && plan->starts.size == 4 * (blocks + 1) &&
               plan->codes.size == 8 * blocks && plan->totals.size == blocks;
  for (size_t b = 0; valid && b < blocks; ++b) {
    const uint32_t offset = U32(plan->offsets, b), begin = U32(plan->starts, b), end = U32(plan->starts, b + 1);
    valid = offset + 8 * count <= plan->tmpl.size && begin <= end && end <= num_members;
  }
  plan->last_row = -1;  // checked against each call's block (SummariesFit)
  for (size_t m = 0; m < num_members; ++m) {
    if (U32(plan->members, m) > plan->last_row) plan->last_row = U32(plan->members, m);
  }
  if (!valid) PyErr_SetString(PyExc_ValueError, kSummariesMismatch);
  return valid;
}

// Whether a block of block_size bytes holds every member row.
bool SummariesFit(const SummariesPlan& plan, size_t block_size) {
  const size_t rows = block_size / 8 / static_cast<size_t>(plan.width);  // 8 * width may wrap to 0
  if (plan.last_row < 0 || static_cast<size_t>(plan.last_row) < rows) return true;
  PyErr_SetString(PyExc_ValueError, kSummariesMismatch);
  return false;
}

// Whether a member row was not written (a kernel that did not run: no Execution from here).
bool Unwritten(const SummariesPlan& plan, const char* base) {
  for (size_t m = 0; m < plan.num_members; ++m) {
    if (At(base + 8 * U32(plan.members, m) * plan.width, 0) == 0.0) return true;
  }
  return false;
}

// The blocks' debug values written into bytes (a copy of the template); *nonfinite (when
// given) set when an output's summary counts a NaN or an Inf.
void FillInto(const SummariesPlan& plan, const char* base, char* bytes, bool* nonfinite) {
  for (size_t b = 0; b < plan.blocks; ++b) {
    const uint32_t offset = U32(plan.offsets, b), begin = U32(plan.starts, b), end = U32(plan.starts, b + 1);
    Counts counts;
    for (uint32_t m = begin; m < end; ++m) counts.Add(base + 8 * U32(plan.members, m) * plan.width);
    const char flags = plan.totals.data[b];
    PutValues(bytes + offset, counts, plan.count, At(plan.codes.data, b), (flags & 1) ? 0.0 : counts.rank);
    if (nonfinite != nullptr && (flags & 2) && counts.Nonfinite()) *nonfinite = true;
  }
}

// first_nonfinite's arguments after the block: (rows, row_width, health): the first kernel
// row (0-based, buffer row + 1) that ran and either holds counts (health[i] & 1) that counted
// a NaN or an Inf, or counts in which only a NaN matters (health[i] & 4: a kernel writing a
// mask's -inf, whose NaN is computed) that counted one, or (the call's flag set, health[i] &
// 2) whose fused ops made one. False with an exception set when they describe no stats rows.
bool ScanFrom(PyObject* const* args, Views* views, ScanPlan* plan) {
  if (!views->health.Get(args[2], "health")) return false;
  plan->rows = PyLong_AsLongLong(args[0]);
  plan->width = PyLong_AsLongLong(args[1]);
  if (PyErr_Occurred()) return false;
  plan->health = MemoryOf(views->health);
  if (plan->rows < 1 || plan->width < 8 || plan->health.size < static_cast<size_t>(plan->rows - 1)) {
    PyErr_SetString(PyExc_ValueError, kScanMismatch);
    return false;
  }
  return true;
}

// The scan's row (see ScanFrom), -1 when none.
long long FirstIn(const ScanPlan& plan, const char* base) {
  const bool inner = InnerFlagged(base, plan.width);
  for (long long r = 1; r < plan.rows; ++r) {
    const char* row = base + 8 * r * plan.width;
    const char hunted = plan.health.data[r - 1];
    if (inner && (hunted & 2) && At(row, 0) != 0.0 && At(row, kInnerColumn) > 0.0) return r - 1;
    if (!(hunted & 5) || At(row, 0) == 0.0) continue;
    Counts counts;
    counts.Add(row);
    if ((hunted & 1) ? counts.Nonfinite() : counts.Nan() != 0.0) return r - 1;
  }
  return -1;
}

bool Shaped(PyObject* tails, PyObject* summaries, PyObject* scan) {
  return PyTuple_Check(tails) && PyTuple_GET_SIZE(tails) == 7 &&
         (summaries == Py_None || (PyTuple_Check(summaries) && PyTuple_GET_SIZE(summaries) == 8)) &&
         (scan == Py_None || (PyTuple_Check(scan) && PyTuple_GET_SIZE(scan) == 3));
}

// call_rows' tails, summaries and scan (see CallRows) as a RowsPlan pointing into views; false
// with an exception set when they describe none.
bool PlanFrom(PyObject* tails, PyObject* summaries, PyObject* scan, Views* views, RowsPlan* plan) {
  if (!Shaped(tails, summaries, scan)) {
    PyErr_SetString(PyExc_TypeError, kCallRowsUsage);
    return false;
  }
  plan->has_summaries = summaries != Py_None;
  plan->has_scan = scan != Py_None;
  return TailsFrom(PySequence_Fast_ITEMS(tails), views, &plan->tails) &&
         (!plan->has_summaries || SummariesFrom(PySequence_Fast_ITEMS(summaries), views, &plan->summaries)) &&
         (!plan->has_scan || ScanFrom(PySequence_Fast_ITEMS(scan), views, &plan->scan));
}

// -- one call's passes ---------------------------------------------------------------------------

// Column 0 of every row set to 0 (no kernel ran): the buffer ready for its next call. Only for
// a call whose row 0 is not flagged: the inner-op check's cells (inner_check.py: a kernel adds
// its ops' counts to them and does not zero them first) are then 0 (every cell added 0). A
// flagged block is not cleared here (Call): the caller reads its rows again, and whoever takes
// the buffer next zeroes all of it (native_call's Stats, fast_tracer._stats).
void ClearStamps(const RowsBlock& block, long long width) {
  const size_t row_bytes = 8 * static_cast<size_t>(width);
  const double zero = 0.0;
  for (size_t offset = 0; offset + row_bytes <= block.size; offset += row_bytes) {
    std::memcpy(block.data + offset, &zero, 8);
  }
}

// call_rows' passes over one call's block (CallRows says what they give), into out and the
// scratch it points into; the scan only when hunting and the plan has one. 0, or -1 with an
// exception set (a block that does not hold the plan's rows, or one to clear not writable).
int Call(const RowsPlan& plan, const RowsBlock& block, bool hunting, bool clear, RowsScratch* scratch, RowsOut* out) {
  const bool scanning = hunting && plan.has_scan;
  if (!Fits(block.size, plan.tails.rows, plan.tails.width, kTailsMismatch) ||
      (plan.has_summaries && !SummariesFit(plan.summaries, block.size)) ||
      (scanning && !Fits(block.size, plan.scan.rows, plan.scan.width, kScanMismatch))) {
    return -1;
  }
  bool nonfinite = false;
  TailsInto(plan.tails, block.data, &nonfinite, scratch, out);
  out->has_execution = plan.has_summaries && !Unwritten(plan.summaries, block.data);
  out->execution = {};
  if (out->has_execution) {
    const Bytes& tmpl = plan.summaries.tmpl;
    scratch->execution.assign(tmpl.data, tmpl.data + tmpl.size);
    FillInto(plan.summaries, block.data, scratch->execution.data(), &nonfinite);
    out->execution = {scratch->execution.data(), tmpl.size};
  }
  const long long width = plan.tails.width;
  // trace_tails' plan fits the block: it holds rows * width doubles.
  const bool inner = InnerFlagged(block.data, width);
  const long long masked = inner ? FirstMasked(block.data, plan.tails.rows, width) : -1;
  if (masked >= 0) nonfinite = true;  // the call holds an alert: kept like a call with a NaN
  out->bad = scanning ? FirstIn(plan.scan, block.data) : -1;
  if (masked >= 0 && out->bad < 0) out->bad = masked;  // none hunted (or not hunting): the hidden one
  out->cleared = clear && !inner && (!plan.has_summaries || out->has_execution);
  if (out->cleared && !block.writable) {
    PyErr_SetString(PyExc_TypeError, "block must be a contiguous writable bytes-like object");
    return -1;
  }
  if (out->cleared) ClearStamps(block, width);
  out->nonfinite = plan.tails.count != 0 || plan.has_summaries ? nonfinite : -1;
  return 0;
}

PyObject* BytesObject(const Bytes& span) { return RecycledBytes(span.data, static_cast<Py_ssize_t>(span.size)); }

// call_rows' 6-tuple of a call's results. Its bytes are made first, from the scratch, before
// any object the collector tracks (whose finalizers could run another call on this thread).
PyObject* Result(const RowsOut& out) {
  PyObject* which = BytesObject(out.which);
  PyObject* tails = which == nullptr ? nullptr : BytesObject(out.tails);
  PyObject* execution = tails == nullptr ? nullptr : out.has_execution ? BytesObject(out.execution) : Py_NewRef(Py_None);
  PyObject* bad = execution == nullptr ? nullptr : PyLong_FromLongLong(out.bad);
  PyObject* tuple = bad == nullptr ? nullptr : PyTuple_New(6);
  if (tuple == nullptr) {
    for (PyObject* made : {which, tails, execution, bad}) Py_XDECREF(made);
    return nullptr;
  }
  PyTuple_SET_ITEM(tuple, 0, which);
  PyTuple_SET_ITEM(tuple, 1, tails);
  PyTuple_SET_ITEM(tuple, 2, execution);
  PyTuple_SET_ITEM(tuple, 3, bad);
  PyTuple_SET_ITEM(tuple, 4, PyBool_FromLong(out.cleared));
  PyTuple_SET_ITEM(tuple, 5, out.nonfinite < 0 ? Py_NewRef(Py_None) : PyBool_FromLong(out.nonfinite));
  return tuple;
}

// A RowsPlan with its own copy of the plan's constants (the context of its capsule).
struct HeldPlan {
  RowsPlan plan{};
  std::vector<char> memory[9];
};

void DropHeldPlan(PyObject* capsule) { delete static_cast<HeldPlan*>(PyCapsule_GetContext(capsule)); }

// The C entry's plan: call_rows' tuples read and checked once, for every call of the plan.
PyObject* MakePlan(PyObject* tails, PyObject* summaries, PyObject* scan) {
  auto held = std::make_unique<HeldPlan>();
  RowsPlan& plan = held->plan;
  {
    Views views;
    if (!PlanFrom(tails, summaries, scan, &views, &plan)) return nullptr;
    Bytes* spans[] = {&plan.tails.traced,     &plan.tails.codes,     &plan.summaries.tmpl,
                     &plan.summaries.offsets, &plan.summaries.starts, &plan.summaries.members,
                     &plan.summaries.codes,   &plan.summaries.totals, &plan.scan.health};
    static_assert(sizeof(spans) / sizeof(spans[0]) == sizeof(held->memory) / sizeof(held->memory[0]));
    for (size_t k = 0; k < sizeof(spans) / sizeof(spans[0]); ++k) {
      held->memory[k].assign(spans[k]->data, spans[k]->data + spans[k]->size);
      spans[k]->data = held->memory[k].data();
    }
  }
  PyObject* capsule = PyCapsule_New(&plan, tvmdbg::kRowsPlanCapsule, DropHeldPlan);
  if (capsule == nullptr || PyCapsule_SetContext(capsule, held.get()) != 0) {
    Py_XDECREF(capsule);
    return nullptr;
  }
  held.release();  // the capsule's now
  return capsule;
}

const tvmdbg::CallRowsEntry kEntry = {MakePlan, Call, Result};

// -- from Python ---------------------------------------------------------------------------------

PyObject* Pair(PyObject* first, PyObject* second) {
  PyObject* out = first == nullptr || second == nullptr ? nullptr : PyTuple_New(2);
  if (out == nullptr) {
    Py_XDECREF(first);
    Py_XDECREF(second);
    return nullptr;
  }
  PyTuple_SET_ITEM(out, 0, first);
  PyTuple_SET_ITEM(out, 1, second);
  return out;
}

// trace_tails(block, rows, row_width, traced, count, codes, stats_column, rate) -> (which,
// tails): see TailsFrom and TailsInto.
PyObject* TraceTails(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 8) {
    PyErr_Format(PyExc_TypeError, "trace_tails takes 8 arguments (%zd given)", nargs);
    return nullptr;
  }
  Buffer block;
  Views views;
  TailsPlan plan;
  if (!block.Get(args[0], "block") || !TailsFrom(args + 1, &views, &plan) ||
      !Fits(block.size(), plan.rows, plan.width, kTailsMismatch)) {
    return nullptr;
  }
  thread_local RowsScratch scratch;
  RowsOut out{};
  bool nonfinite = false;
  TailsInto(plan, block.data(), &nonfinite, &scratch, &out);
  PyObject* which = BytesObject(out.which);
  return Pair(which, which == nullptr ? nullptr : BytesObject(out.tails));
}

// summaries(template, offsets, starts, members, codes, totals, count, block, row_width)
//   -> bytes | None: the Execution's bytes (see SummariesFrom); None when a member row was
//   not written.
PyObject* Summaries(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 9) {
    PyErr_Format(PyExc_TypeError, "summaries takes 9 arguments (%zd given)", nargs);
    return nullptr;
  }
  PyObject* const described[8] = {args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[8]};
  Buffer block;
  Views views;
  SummariesPlan plan;
  if (!block.Get(args[7], "block") || !SummariesFrom(described, &views, &plan) || !SummariesFit(plan, block.size())) {
    return nullptr;
  }
  if (Unwritten(plan, block.data())) Py_RETURN_NONE;
  PyObject* out = RecycledBytes(plan.tmpl.data, static_cast<Py_ssize_t>(plan.tmpl.size));
  if (out != nullptr) FillInto(plan, block.data(), PyBytes_AS_STRING(out), nullptr);
  return out;
}

// first_nonfinite(block, rows, row_width, health) -> int: see ScanFrom; -1 when none.
PyObject* FirstNonfinite(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_Format(PyExc_TypeError, "first_nonfinite takes 4 arguments (%zd given)", nargs);
    return nullptr;
  }
  Buffer block;
  Views views;
  ScanPlan plan;
  if (!block.Get(args[0], "block") || !ScanFrom(args + 1, &views, &plan) ||
      !Fits(block.size(), plan.rows, plan.width, kScanMismatch)) {
    return nullptr;
  }
  return PyLong_FromLongLong(FirstIn(plan, block.data()));
}

// call_rows(block, tails, summaries, scan, clear)
//   -> (which, tails, execution, bad, cleared, nonfinite):
// one call's three passes in one CPython call (a training step's call pays ~1 us per
// Python step; native_call runs the same passes through the C entry CALL_ROWS):
//   tails: trace_tails' arguments after block; summaries: those of summaries without block
//   (template .. count, row_width), or None: execution is None; scan: first_nonfinite's
//   (rows, row_width, health), or None: bad is -1; either way, when first_nonfinite finds
//   none, the first row whose fused ops made a NaN or an Inf that its output hides
//   (FirstMasked: the caller records them, and scans again what the hunt looks at);
//   clear: once read, the block's column 0 is set to 0 (see ClearStamps), unless the
//   summaries found a row not written or a kernel's ops made a NaN or an Inf (row 0
//   flagged: the caller reads the buffer again, and its next taker zeroes all of it);
//   cleared says so;
//   nonfinite: whether a trace's or an output's counts hold a NaN or an Inf, or a kernel
//   hides one its ops made (None when the tails hold no counts: the writer's accounting of
//   calls, for free here).
PyObject* CallRows(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 || !Shaped(args[1], args[2], args[3])) {
    PyErr_SetString(PyExc_TypeError, kCallRowsUsage);
    return nullptr;
  }
  Buffer held;  // the pool's buffers are writable (ClearStamps needs it); another is read as it is
  const bool writable = held.Get(args[0], "block", true);
  if (!writable) {
    PyErr_Clear();
    if (!held.Get(args[0], "block")) return nullptr;
  }
  Views views;
  RowsPlan plan{};
  if (!PlanFrom(args[1], args[2], args[3], &views, &plan)) return nullptr;
  const int clear = PyObject_IsTrue(args[4]);
  if (clear < 0) return nullptr;
  thread_local RowsScratch scratch;
  RowsOut out{};
  if (Call(plan, {held.mutable_data(), held.size(), writable}, true, clear == 1, &scratch, &out) != 0) return nullptr;
  return Result(out);
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

PyMODINIT_FUNC PyInit_native_rows() {
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  void* entry_address = const_cast<tvmdbg::CallRowsEntry*>(&kEntry);
  PyObject* entry = PyCapsule_New(entry_address, tvmdbg::kCallRowsCapsule, nullptr);
  if (entry == nullptr || PyModule_AddObject(module, "CALL_ROWS", entry) != 0) {
    Py_XDECREF(entry);
    Py_CLEAR(module);
  }
  return module;
}
