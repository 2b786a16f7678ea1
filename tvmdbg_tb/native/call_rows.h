// A compiled call's stats rows turned into its records' parts, shared by native_rows.cc (its
// call_rows, trace_tails, summaries and first_nonfinite, from Python, and its C entry) and
// native_call.cc (which runs a call's passes through that C entry, the capsule
// native_rows.CALL_ROWS: a plan's constants are read once when the plan is made, the block's
// memory is taken as it is, and the results stay memory; no Python object is made or parsed
// per call).
#ifndef TVMDBG_NATIVE_CALL_ROWS_H_
#define TVMDBG_NATIVE_CALL_ROWS_H_

#include "python_buffer.h"

#include <cstdint>
#include <vector>

namespace tvmdbg {

// A plan's constants (call_rows' tuples), read and checked once: trace_tails' (without the
// block), summaries' (without the block) when has_summaries, first_nonfinite's when has_scan.
// Their Bytes point into memory the plan's owner keeps.
struct TailsPlan {
  long long rows, width, count, stats;
  double rate;
  Bytes traced, codes;
};

struct SummariesPlan {
  Bytes tmpl, offsets, starts, members, codes, totals;
  long long count, width;
  size_t blocks, num_members;
  long long last_row;  // the highest member row (-1: none): the block must hold it
};

struct ScanPlan {
  long long rows, width;
  Bytes health;
};

struct RowsPlan {
  TailsPlan tails;
  bool has_summaries;
  SummariesPlan summaries;
  bool has_scan;
  ScanPlan scan;
};

// The stats block of one call: its memory, and whether it may be written (column 0 cleared).
struct RowsBlock {
  char* data;
  size_t size;
  bool writable;
};

// Where a call's results are written: kept by the caller from call to call (no allocation once
// they have grown), never shared by two calls running at once.
struct RowsScratch {
  std::vector<char> which, tails, execution;
};

// One call's results (call_rows' 6-tuple as memory): which and tails (trace_tails'), the
// Execution's bytes when the plan has summaries and every member row was written (else
// has_execution is false: None), bad (the row to hunt or hide, -1: none), whether column 0 was
// cleared, and nonfinite (-1: the records hold no counts; 0, 1). Memory in the scratch.
struct RowsOut {
  Bytes which, tails, execution;
  bool has_execution;
  long long bad;
  bool cleared;
  int nonfinite;
};

// native_rows' C entry (CALL_ROWS points to one):
//   plan(tails, summaries, scan): a plan's RowsPlan, checked as call_rows checks its arguments
//     (same errors), in a new capsule named kRowsPlanCapsule that owns it; nullptr with an
//     exception set;
//   call(plan, block, hunting, clear, scratch, out): call_rows' passes (the scan only when
//     hunting and the plan has one); 0, or -1 with an exception set;
//   result(out): call_rows' 6-tuple of out, a new reference (nullptr with an exception set).
struct CallRowsEntry {
  PyObject* (*plan)(PyObject* tails, PyObject* summaries, PyObject* scan);
  int (*call)(const RowsPlan& plan, const RowsBlock& block, bool hunting, bool clear, RowsScratch* scratch,
              RowsOut* out);
  PyObject* (*result)(const RowsOut& out);
};

constexpr const char kCallRowsCapsule[] = "tvmdbg_tb.native.native_rows.CALL_ROWS";
constexpr const char kRowsPlanCapsule[] = "tvmdbg_tb.native.native_rows.RowsPlan";

}  // namespace tvmdbg

#endif  // TVMDBG_NATIVE_CALL_ROWS_H_
