"""TvmDebuggerPlugin: the "TVM Debugger" tab's JSON routes and static files.

A background thread reads the logdir incrementally (new runs, new records, damaged records
reported and skipped); routes answer from the reader's in-memory indexes. The JSON shapes
are documented in docs/routes.md and built by tvmdbg_tb.analysis, which the CLI shares.
Every answer goes through tensorboard.backend.http_util.Respond; bad parameters answer 400,
unknown things 404, both as {"error": "..."}.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable

import numpy as np
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tvmdbg_tb import analysis, storage
from tvmdbg_tb.analysis.alerts import RANGE_PAGE
from tvmdbg_tb.analysis.graph_index import op_index
from tvmdbg_tb.analysis.graph_views import (
    MAX_DEPTH,
    MAX_GRAPH_PAGE,
    MAX_GROUPS,
    MAX_NEIGHBORHOOD_OPS,
    MAX_SEARCH_RESULTS,
    num_ops,
)
from tvmdbg_tb.analysis.op_stats import DEFAULT_MAX_POINTS, MAX_POINTS
from tvmdbg_tb.analysis.tensor_value import DEFAULT_MAX_ELEMENTS, MAX_BINS, MAX_ELEMENTS, SliceError
from tvmdbg_tb.analysis.views import MAX_SOURCE_PAGE
from tvmdbg_tb.events import layout
from tvmdbg_tb.events.reader import DebugDataReader, RunReader
from tvmdbg_tb.live.routes import live_routes
from tvmdbg_tb.plugin import PLUGIN_NAME
from tvmdbg_tb.plugin.guard import RequestGuard
from tvmdbg_tb.plugin.memory import limit_allocator_retention

logger = logging.getLogger("tvmdbg.plugin")

MAX_PAGE = 10_000
_MAX_INT = 1 << 62
_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON = "application/json"
_MISSING_BUNDLE_JS = """\
// The tvmdbg dashboard bundle is not built; this stand-in says so.
export function render() {
  const box = document.createElement("pre");
  box.style.cssText = "font: 14px sans-serif; margin: 2em; white-space: pre-wrap";
  box.textContent =
    "The TVM Debugger dashboard is not built.\\n\\n" +
    "Build it with `bash tvmdbg_tb_frontend/build.sh` (needs Node.js >= 20) in the tvmdbg " +
    "source tree, or install a tvmdbg wheel, then reload this page.\\n\\n" +
    "The data routes work meanwhile: see data/plugin/tvmdbg/runs.";
  document.body.appendChild(box);
}
"""


class BadRequest(ValueError):
    """The client's parameters are missing or malformed (400)."""


class NotFound(LookupError):
    """The client named something that does not exist (404)."""


def _json_route(handler: Callable[[TvmDebuggerPlugin, wrappers.Request], object]):
    """Wraps a handler returning JSON-ready data into a WSGI app with the error policy."""

    @wrappers.Request.application
    def app(self, request: wrappers.Request):
        try:
            return http_util.Respond(request, _json_text(handler(self, request)), _JSON)
        except BadRequest as error:
            return http_util.Respond(request, {"error": str(error)}, _JSON, code=400)
        except LookupError as error:  # NotFound, and the reader's KeyError/IndexError/StaleRecordError
            message = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
            return http_util.Respond(request, {"error": str(message)}, _JSON, code=404)
        except Exception as error:  # a bug of ours: say so without a traceback, log it
            logger.exception("tvmdbg: %s failed", request.path)
            return http_util.Respond(request, {"error": f"internal error: {type(error).__name__}"}, _JSON, code=500)

    app.__doc__ = handler.__doc__
    return app


def _json_text(answer: object) -> object:
    """The answer as JSON text when plain json writes it (no NaN/Inf, bytes or sets), which
    is byte for byte what Respond writes after its Cleanse; else the answer, for Respond.
    Cleanse walks every value in Python, a large share of the plugin's CPU under load.
    A typed answer (analysis.Answer) is sent as its to_json(); other answers (text, bytes)
    go to Respond as they are."""
    if isinstance(answer, analysis.Answer):
        answer = answer.to_json()
    if not isinstance(answer, (dict, list, tuple)):
        return answer
    try:
        return json.dumps(answer, allow_nan=False)
    except (TypeError, ValueError):
        return answer


# -- parameters ----------------------------------------------------------------------------


def _int_param(request, name: str, default: int | None = None, minimum: int | None = None) -> int | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise BadRequest(f"parameter {name!r} must be an integer, got {raw[:50]!r}") from None
    if abs(value) > _MAX_INT:
        raise BadRequest(f"parameter {name!r} is out of range")
    if minimum is not None and value < minimum:
        raise BadRequest(f"parameter {name!r} must be >= {minimum}, got {value}")
    return value


def _required_int(request, name: str, minimum: int | None = None) -> int:
    value = _int_param(request, name, minimum=minimum)
    if value is None:
        raise BadRequest(f"missing parameter {name!r}")
    return value


def _page(request, total: int, max_page: int = MAX_PAGE) -> tuple[int, int]:
    """(begin, end) from begin/end (end=-1 means all, end is clamped to total) or, when either
    is given, from offset/limit ([offset, offset + limit); limit defaults to a full page)."""
    if "offset" in request.args or "limit" in request.args:
        offset = _int_param(request, "offset", 0, minimum=0)
        limit = _int_param(request, "limit", min(max_page, total), minimum=0)
        if limit > max_page:
            raise BadRequest(f"limit {limit} is larger than {max_page}; page with offset and limit")
        return min(offset, total), min(offset + limit, total)
    begin = _int_param(request, "begin", 0, minimum=0)
    end = _int_param(request, "end", -1, minimum=-1)
    if end != -1 and end < begin:
        raise BadRequest(f"end ({end}) must be -1 or >= begin ({begin})")
    end = total if end == -1 else min(end, total)
    begin = min(begin, end)
    if end - begin > max_page:
        raise BadRequest(f"page of {end - begin} rows is larger than {max_page}; ask for a range with begin and end")
    return begin, end


# Seconds between polls of a logdir on an object store (docs/storage.md#costs).
REMOTE_POLL_SECONDS = 5.0


class TvmDebuggerPlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context, poll_interval: float = 1.0, start_reader: bool = True):
        self._logdir = getattr(context, "logdir", "") or ""
        self._guard = RequestGuard.from_flags(getattr(context, "flags", None))
        limit_allocator_retention()  # many request threads: RSS close to the live memory
        self._poll_interval = poll_interval
        self._reader: DebugDataReader | None = None
        self._reader_error: str | None = None
        try:
            self._reader = DebugDataReader(self._logdir) if self._logdir else None
        except storage.StoreUnavailableError as error:  # s3:// without s3fs: said by the status route
            self._reader_error = str(error)
            logger.error("tvmdbg: %s", error)
        if self._reader is not None and self._reader.store.remote:
            # A poll lists every run (a LIST request each): a bucket is polled less often.
            self._poll_interval = max(poll_interval, REMOTE_POLL_SECONDS)
        self._active = False
        self._active_checked = 0.0
        self._polls = 0
        self._last_poll: float | None = None
        self._reported_corruptions: dict[str, int] = {}
        self._reported_errors: dict[str, str | None] = {}
        self._read_once: frozenset[str] = frozenset()  # runs a whole poll has read (their first NaN is known)
        self._jobs = None  # CompareJobs, made by the first compare request
        self._jobs_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if start_reader and self._reader is not None:
            self._thread = threading.Thread(target=self._read_forever, name="tvmdbg-reader", daemon=True)
            self._thread.start()

    # -- background reading ----------------------------------------------------------------

    def poll(self) -> None:
        """Reads what is new in the logdir once. Never raises: failures are logged and kept
        for the `status` route, and the next poll goes on."""
        if self._reader is None:
            return
        try:
            for name in self._reader.discover():  # alerts are computed as each chunk is read
                analysis.monitor(self._reader.run(name))
            self._reader.update()  # discovers runs, then reads each: all of them are read once now
            for name in self._reader.runs():  # big graphs are indexed here, not in a request
                op_index(self._reader.run(name))
            self._read_once = frozenset(self._reader.runs())
            self._reader_error = None
        except Exception as error:
            message = f"{type(error).__name__}: {error}"
            if message != self._reader_error:  # log each new failure once, not every poll
                logger.exception("tvmdbg: reading %s failed; retrying", self._logdir)
            self._reader_error = message
        self._report_corruptions()
        self._polls += 1
        self._last_poll = time.time()

    def _report_corruptions(self) -> None:
        for name in self._reader.runs():
            run = self._reader.run(name)
            if run.error and run.error != self._reported_errors.get(name):
                logger.warning("tvmdbg: reading run %s failed (retrying): %s", name, run.error)
            self._reported_errors[name] = run.error
            seen = self._reported_corruptions.get(name, 0)
            for corruption in run.corruptions[seen:]:
                logger.warning("tvmdbg: %s", corruption)
            self._reported_corruptions[name] = len(run.corruptions)

    def _read_forever(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self._poll_interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # -- TBPlugin --------------------------------------------------------------------------

    def is_active(self) -> bool:
        """True once any run exists under the logdir (TensorBoard does not poll this again)."""
        if self._active or not self._logdir:
            return self._active
        if self._reader is not None and self._reader.runs():
            self._active = True
            return True
        now = time.time()
        if now - self._active_checked > 2.0:
            self._active_checked = now
            try:
                self._active = self._reader is not None and bool(layout.find_run_dirs(self._reader.store))
            except OSError:
                self._active = False
        return self._active

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="TVM Debugger")

    def get_plugin_apps(self):
        """Every route behind the guard (Host, Origin, and POSTs only from the dashboard)."""
        apps = {
            "/index.js": self._serve_index_js,
            "/runs": self._serve_runs,
            "/status": self._serve_status,
            "/alerts": self._serve_alerts,
            "/replays": self._serve_replays,
            "/execution/digests": self._serve_execution_digests,
            "/execution/data": self._serve_execution_data,
            "/graph_execution/digests": self._serve_graph_execution_digests,
            "/graph_execution/data": self._serve_graph_execution_data,
            "/graph_execution/op_traces": self._serve_op_traces,
            "/graph_execution/op_stats": self._serve_op_stats,
            "/graphs/list": self._serve_graphs_list,
            "/graphs/graph_info": self._serve_graph_info,
            "/graphs/neighborhood": self._serve_neighborhood,
            "/graphs/overview": self._serve_overview,
            "/graphs/search": self._serve_search,
            "/graphs/op_info": self._serve_op_info,
            "/source_files/list": self._serve_source_files_list,
            "/source_files/file": self._serve_source_file,
            "/source_files/op_lines": self._serve_op_lines,
            "/stack_frames/stack_frames": self._serve_stack_frames,
            "/tensor/value": self._serve_tensor_value,
            "/tensor/histogram": self._serve_tensor_histogram,
            "/profile": self._serve_profile,
            **live_routes(self._run),  # tvmdbg_tb.live: relayed to a live program
            "/compare": self._serve_compare,
            "/*": self._serve_static,
        }
        return {route: self._guard.wrap(app) for route, app in apps.items()}

    # -- static files ----------------------------------------------------------------------

    @staticmethod
    def _bundle_files() -> dict[str, str]:
        """{relative path: absolute path} of every file in the built bundle."""
        try:
            from tvmdbg_tb_frontend import DIST_DIR
        except ImportError:
            return {}
        root = str(DIST_DIR)
        files = {}
        for directory, _dirs, names in os.walk(root):
            for name in names:
                if not name.startswith("."):
                    full = os.path.join(directory, name)
                    files[os.path.relpath(full, root).replace(os.sep, "/")] = full
        return files

    @wrappers.Request.application
    def _serve_index_js(self, request):
        path = self._bundle_files().get("index.js")
        if path is None:
            return http_util.Respond(request, _MISSING_BUNDLE_JS, "application/javascript")
        with open(path, "rb") as f:
            return http_util.Respond(request, f.read(), "application/javascript")

    @wrappers.Request.application
    def _serve_static(self, request):
        """A file of the bundle, by its name inside the bundle (looked up, never joined)."""
        prefix = f"/data/plugin/{PLUGIN_NAME}/"
        path = request.path
        at = path.find(prefix)
        name = path[at + len(prefix) :] if at >= 0 else ""
        full = self._bundle_files().get(name)
        if full is None:
            return http_util.Respond(request, {"error": f"no such file or route: {name[:200]!r}"}, _JSON, code=404)
        content_type = {
            ".js": "application/javascript",
            ".mjs": "application/javascript",
            ".css": "text/css",
            ".html": "text/html",
            ".json": "application/json",
            ".map": "application/json",
            ".svg": "image/svg+xml",
            ".png": "image/png",
            ".woff2": "font/woff2",
            ".txt": "text/plain",
        }.get(os.path.splitext(name)[1].lower(), "application/octet-stream")
        with open(full, "rb") as f:
            return http_util.Respond(request, f.read(), content_type)

    # -- helpers ---------------------------------------------------------------------------

    def _runs(self) -> list[RunReader]:
        if self._reader is None:
            return []
        return [self._reader.run(name) for name in self._reader.runs()]

    def _run(self, request) -> RunReader:
        return self._named_run(request.args.get("run"), "run")

    def _named_run(self, name: str | None, parameter: str) -> RunReader:
        """The run a parameter names: as `runs` lists it, or as a browser sends a name that is
        not UTF-8 (a directory named with other bytes: each lone surrogate of its name, which
        a URL cannot carry, arrives as U+FFFD)."""
        if not name:
            raise BadRequest(f"missing parameter {parameter!r}")
        runs = self._reader.runs() if self._reader is not None else []
        if name not in runs:
            name = next((run for run in runs if _SURROGATE.sub("\ufffd", run) == name), name)
        if name not in runs:
            raise NotFound(f"no run {name[:200]!r} in the logdir")
        return self._reader.run(name)

    def _op(self, request, run: RunReader):
        op_id = _int_param(request, "op_id")
        graph_id = _int_param(request, "graph_id")
        op_name = request.args.get("op_name")
        if op_id is None and (graph_id is None or not op_name):
            raise BadRequest("give 'op_id', or 'graph_id' and 'op_name'")
        try:
            return analysis.resolve_op(run, op_id, graph_id, op_name)
        except KeyError as error:
            raise NotFound(error.args[0]) from None

    def _trace_positions(self, request, run: RunReader) -> np.ndarray | None:
        """Positions of the traces of one execution when execution_index is given."""
        execution_index = _int_param(request, "execution_index")
        if execution_index is None:
            return None
        return run.execution_trace_indices(execution_index)

    # -- routes ----------------------------------------------------------------------------

    @_json_route
    def _serve_runs(self, request):
        """{"runs": [run info], "default_run", "default_run_reason"} — see docs/routes.md#runs."""
        runs = self._runs()
        default, reason = None, "no runs"
        if runs and all(run.name in self._read_once for run in runs):
            try:
                chosen, reason = self._reader.choose()  # the CLI's and the reader's rule
                default = chosen.name
            except LookupError:  # the runs went meanwhile
                pass
        elif runs:
            reason = "not every run has been read yet"
        return {
            "runs": [analysis.run_info(run) for run in runs],
            "default_run": default,
            "default_run_reason": reason,
        }

    @_json_route
    def _serve_status(self, request):
        """The reader's live state and read errors — see docs/routes.md#status."""
        runs = self._runs()
        if request.args.get("run"):
            runs = [self._run(request)]
        problems = []
        if not self._logdir:
            problems.append("TensorBoard was started without --logdir (tvmdbg reads only --logdir)")
        elif not runs and (problem := storage.location_problem(self._logdir)) is not None:
            problems.append(
                f"logdir {self._logdir} does not exist (yet)"
                if problem == "no such directory"
                else f"logdir {self._logdir}: {problem}"
            )
        if self._reader_error:
            problems.append(f"reading failed: {self._reader_error}")
        out_runs = []
        for run in runs:
            updated = analysis.views.last_update_time(run)
            corruptions = list(run.corruptions)
            if run.error:
                problems.append(f"run {run.name}: reading failed: {run.error}")
            if corruptions:
                problems.append(f"run {run.name}: {len(corruptions)} damaged record(s) skipped")
            completeness = run.completeness()
            missing = [p.message for p in completeness.problems if p.kind != "damaged"]  # damage: said above
            if missing:
                problems.append(f"run {run.name}: {completeness.state}: {'; '.join(missing)}")
            out_runs.append(
                {
                    "run": run.name,
                    "num_executions": run.num_executions(),
                    "num_traces": run.num_traces(),
                    "last_update_time": updated,
                    "live": analysis.views.is_live(completeness, updated),
                    "indexing": run.updating,
                    "error": run.error,
                    "num_corruptions": len(corruptions),
                    "corruptions": [
                        {"path": c.path, "offset": c.offset, "length": c.length, "reason": c.reason, "message": str(c)}
                        for c in corruptions[:100]
                    ],
                    "completeness": completeness.to_json(),
                }
            )
        return {
            "logdir": self._logdir,
            "now": time.time(),
            "reader": {
                "running": self._thread is not None and self._thread.is_alive(),
                "last_poll_time": self._last_poll,
                "poll_interval_s": self._poll_interval,
                "polls": self._polls,
                "error": self._reader_error,
            },
            "runs": out_runs,
            "problems": problems,
        }

    @_json_route
    def _serve_alerts(self, request):
        """NaN/Inf alerts in execution order — see docs/routes.md#alerts."""
        run = self._run(request)
        alert_type = request.args.get("alert_type") or None
        begin, end = _page(request, analysis.num_alerts(run))
        range_begin = _int_param(request, "range_offset", 0, minimum=0)
        range_limit = _int_param(request, "range_limit", RANGE_PAGE, minimum=0)
        if range_limit > MAX_PAGE:
            raise BadRequest(f"range_limit {range_limit} is larger than {MAX_PAGE}; page with range_offset")
        return analysis.alerts_page(run, begin, end, alert_type, range_begin, range_begin + range_limit)

    @_json_route
    def _serve_replays(self, request):
        """Op-by-op replays of fused kernel calls — see docs/routes.md#replays."""
        run = self._run(request)
        op_id = _int_param(request, "op_id", minimum=0)
        execution_index = _int_param(request, "execution_index", minimum=0)
        if op_id is not None:
            self._op(request, run)  # 404 for an unknown op
        with run.lock:
            return analysis.replays(run, op_id, execution_index)

    @_json_route
    def _serve_execution_digests(self, request):
        """Light rows of top-level calls — see docs/routes.md#executiondigests. With
        `function` (and `call`, its VM's call number: a loop's step), the page is of that
        function's calls only ("go to decode step 14")."""
        run = self._run(request)
        function = request.args.get("function")
        call = _int_param(request, "call", minimum=1)
        if call is not None and not function:
            raise BadRequest("parameter 'call' needs 'function' (the call number counts that function's calls)")
        with run.lock:
            if not function:
                total = run.num_executions()
                begin, end = _page(request, total)
                rows = analysis.execution_digests(run, begin, end)
            else:
                found = analysis.calls_of(run, function, call)
                total = len(found)
                begin, end = _page(request, total)
                rows = analysis.execution_rows(run, found[begin:end])
        return {"begin": begin, "end": end, "num_digests": total, "execution_digests": rows}

    @_json_route
    def _serve_execution_data(self, request):
        """Full executions — see docs/routes.md#executiondata."""
        run = self._run(request)
        with run.lock:
            total = run.num_executions()
            begin, end = _page(request, total, max_page=100)
            rows = analysis.execution_data(run, begin, end)
        return {"begin": begin, "end": end, "num_digests": total, "executions": rows}

    def _traces_page(self, request, run: RunReader, max_page: int) -> tuple[int, int, int, np.ndarray]:
        subset = self._trace_positions(request, run)
        total = run.num_traces() if subset is None else len(subset)
        begin, end = _page(request, total, max_page)
        positions = np.arange(begin, end, dtype=np.int64) if subset is None else subset[begin:end]
        return begin, end, total, positions

    @_json_route
    def _serve_graph_execution_digests(self, request):
        """Light rows of kernel executions — see docs/routes.md#graph_executiondigests."""
        run = self._run(request)
        with run.lock:  # positions and rows from one state of the dump
            begin, end, total, positions = self._traces_page(request, run, MAX_PAGE)
            rows = analysis.trace_digests(run, positions)
        return {"begin": begin, "end": end, "num_digests": total, "graph_execution_digests": rows}

    @_json_route
    def _serve_graph_execution_data(self, request):
        """Full kernel executions — see docs/routes.md#graph_executiondata."""
        run = self._run(request)
        with run.lock:
            begin, end, total, positions = self._traces_page(request, run, 1000)
            rows = analysis.trace_data(run, positions)
        return {"begin": begin, "end": end, "num_digests": total, "graph_executions": rows}

    @_json_route
    def _serve_op_traces(self, request):
        """Every execution of one op — see docs/routes.md#graph_executionop_traces."""
        run = self._run(request)
        op = self._op(request, run)
        slot = _int_param(request, "output_slot", minimum=0)
        execution_index = _int_param(request, "execution_index", minimum=0)
        since = _int_param(request, "from_execution_index", minimum=0)
        with run.lock:
            positions = run.op_trace_indices(op.op_id, slot)
            calls = run.trace_digests()["execution_index"][positions]
            if execution_index is not None:  # the op's executions in that call only
                positions = positions[calls == execution_index]
            elif since is not None:  # from that call on (the one nearest a selection)
                positions = positions[calls >= since]
            begin, end = _page(request, len(positions), 1000)
            rows = analysis.trace_data(run, positions[begin:end])
        return {
            "op_id": int(op.op_id),
            "op_name": op.op_name,
            "begin": begin,
            "end": end,
            "num_traces": int(len(positions)),
            "traces": rows,
        }

    @_json_route
    def _serve_op_stats(self, request):
        """One op's min/max/mean/abs-max call after call (FULL_STATS) — see docs/routes.md#graph_executionop_stats."""
        run = self._run(request)
        op = self._op(request, run)
        slot = _int_param(request, "output_slot", 0, minimum=0)
        max_points = _int_param(request, "max_points", DEFAULT_MAX_POINTS, minimum=1)
        if max_points > MAX_POINTS:
            raise BadRequest(f"max_points must be <= {MAX_POINTS}")
        return analysis.op_stats(run, op, slot, max_points)

    @_json_route
    def _serve_graphs_list(self, request):
        """The compiled functions of a run — see docs/routes.md#graphslist."""
        return {"graphs": analysis.graphs_list(self._run(request))}

    @_json_route
    def _serve_graph_info(self, request):
        """A compiled function's ops, a page at a time: ops, edges, fused constituents — see docs/routes.md#graphsgraph_info."""
        run = self._run(request)
        graph_id = _required_int(request, "graph_id")
        total = num_ops(run, graph_id)
        paged = any(k in request.args for k in ("begin", "end", "offset", "limit"))
        if not paged and total > MAX_GRAPH_PAGE:
            raise BadRequest(
                f"graph {graph_id} has {total} ops, more than {MAX_GRAPH_PAGE} per answer: page it with begin and end, "
                "or ask graphs/neighborhood (around an op) or graphs/overview (folded)"
            )
        begin, end = _page(request, total, MAX_GRAPH_PAGE)
        return analysis.graph_page(run, graph_id, begin, end)

    @_json_route
    def _serve_neighborhood(self, request):
        """The ops around one op, bounded — see docs/routes.md#graphsneighborhood."""
        run = self._run(request)
        op = self._op(request, run)
        depth = _int_param(request, "depth", 4, minimum=0)
        max_ops = _int_param(request, "max_ops", 48, minimum=1)
        if depth > MAX_DEPTH or max_ops > MAX_NEIGHBORHOOD_OPS:
            raise BadRequest(f"depth must be <= {MAX_DEPTH} and max_ops <= {MAX_NEIGHBORHOOD_OPS}")
        execution_index = _int_param(request, "execution_index", minimum=0)
        return analysis.neighborhood(run, int(op.op_id), depth, max_ops, execution_index)

    @_json_route
    def _serve_overview(self, request):
        """A function folded into groups of consecutive ops — see docs/routes.md#graphsoverview."""
        run = self._run(request)
        graph_id = _required_int(request, "graph_id")
        total = num_ops(run, graph_id)
        begin = _int_param(request, "begin", 0, minimum=0)
        end = _int_param(request, "end", -1, minimum=-1)
        if end != -1 and end < begin:
            raise BadRequest(f"end ({end}) must be -1 or >= begin ({begin})")
        max_groups = _int_param(request, "max_groups", 200, minimum=1)
        if max_groups > MAX_GROUPS:
            raise BadRequest(f"max_groups must be <= {MAX_GROUPS}")
        execution_index = _int_param(request, "execution_index", minimum=0)
        end = total if end == -1 else end
        return analysis.overview(run, graph_id, begin, end, max_groups, execution_index)

    @_json_route
    def _serve_search(self, request):
        """Ops found by name, kernel, op type, model node or line — see docs/routes.md#graphssearch."""
        run = self._run(request)
        query = request.args.get("q", "")
        if len(query) > 1000:
            raise BadRequest("parameter 'q' is longer than 1000 characters")
        limit = _int_param(request, "limit", 30, minimum=1)
        if limit > MAX_SEARCH_RESULTS:
            raise BadRequest(f"limit must be <= {MAX_SEARCH_RESULTS}")
        graph_id = _int_param(request, "graph_id")
        if graph_id is not None:
            run.graph(graph_id)  # 404 for an unknown graph
        return analysis.search(run, query, limit, graph_id)

    @_json_route
    def _serve_op_info(self, request):
        """One op with inputs, consumers and latest summaries — see docs/routes.md#graphsop_info."""
        run = self._run(request)
        op = self._op(request, run)
        execution_index = _int_param(request, "execution_index", minimum=0)
        with run.lock:
            return analysis.op_info(run, op, execution_index)

    @_json_route
    def _serve_source_files_list(self, request):
        """The source files recorded in a run — see docs/routes.md#source_fileslist."""
        return {"source_files": analysis.source_files_list(self._run(request))}

    @_json_route
    def _serve_source_file(self, request):
        """Lines of one recorded source file, by index only — see docs/routes.md#source_filesfile."""
        run = self._run(request)
        index = _required_int(request, "index", minimum=0)
        begin, end = _page(request, len(run.source_file(index).lines), MAX_SOURCE_PAGE)
        return analysis.source_file(run, index, begin, end)

    @_json_route
    def _serve_op_lines(self, request):
        """The ops created at lines of a recorded file — see docs/routes.md#source_filesop_lines."""
        run = self._run(request)
        index = _required_int(request, "index", minimum=0)
        begin, end = _page(request, len(run.source_file(index).lines), MAX_SOURCE_PAGE)
        return analysis.op_lines(run, index, begin, end)

    @_json_route
    def _serve_stack_frames(self, request):
        """Stack frames by id — see docs/routes.md#stack_framesstack_frames."""
        run = self._run(request)
        raw = request.args.get("stack_frame_ids")
        if raw is None:
            raise BadRequest("missing parameter 'stack_frame_ids'")
        parts = [p.strip() for p in raw.split(",") if p.strip()]
        if len(parts) > 1000:
            raise BadRequest("at most 1000 stack_frame_ids per request")
        try:
            ids = [int(p) for p in parts]
        except ValueError:
            raise BadRequest("stack_frame_ids must be comma-separated integers") from None
        return {"stack_frames": analysis.stack_frames(run, ids)}

    @_json_route
    def _serve_tensor_value(self, request):
        """A FULL_TENSOR value, sliced — see docs/routes.md#tensorvalue."""
        run = self._run(request)
        position = _required_int(request, "trace", minimum=0)
        max_elements = _int_param(request, "max_elements", DEFAULT_MAX_ELEMENTS, minimum=1)
        if max_elements > MAX_ELEMENTS:
            raise BadRequest(f"max_elements must be <= {MAX_ELEMENTS}")
        try:
            return analysis.tensor_value(run, position, request.args.get("slice", ""), max_elements)
        except SliceError as error:
            raise BadRequest(str(error)) from None

    @_json_route
    def _serve_tensor_histogram(self, request):
        """A histogram of a FULL_TENSOR value — see docs/routes.md#tensorhistogram."""
        run = self._run(request)
        position = _required_int(request, "trace", minimum=0)
        bins = _int_param(request, "bins", 30, minimum=1)
        if bins > MAX_BINS:
            raise BadRequest(f"bins must be <= {MAX_BINS}")
        return analysis.tensor_histogram(run, position, bins)

    @_json_route
    def _serve_profile(self, request):
        """Per-op time table — see docs/routes.md#profile."""
        run = self._run(request)
        graph_id = _int_param(request, "graph_id")
        if graph_id is not None:
            run.graph(graph_id)  # 404 for an unknown graph
        return analysis.profile(run, graph_id, _int_param(request, "execution_index"))

    @_json_route
    def _serve_compare(self, request):
        """Op-by-op comparison of run_a against the reference run_b — see docs/routes.md#compare."""
        from tvmdbg_tb.compare import DEFAULT_ATOL, DEFAULT_RTOL, CompareError, Comparison

        runs = [self._named_run(request.args.get(name), name) for name in ("run_a", "run_b")]
        tolerances = []
        for name, default in (("rtol", DEFAULT_RTOL), ("atol", DEFAULT_ATOL)):
            raw = request.args.get(name) or ""
            try:
                value = float(raw) if raw.strip() else default
            except ValueError:
                raise BadRequest(f"parameter {name!r} must be a number, got {raw[:50]!r}") from None
            if not value >= 0 or value == float("inf"):
                raise BadRequest(f"parameter {name!r} must be a finite number >= 0")
            tolerances.append(value)
        call = _int_param(request, "call", minimum=0)
        function = request.args.get("function") or None
        # Answered at once; a fused first divergent kernel is opened in the background (the
        # answer says "pending" until a later request for the same state of both runs).
        state = tuple((r.name, r.num_executions(), r.num_traces()) for r in runs)
        key = (state, *tolerances, call, function)
        try:
            return self._compare_jobs().answer(
                key, lambda: Comparison(runs[0], runs[1], tolerances[0], tolerances[1], call, function)
            )
        except CompareError as error:
            return {"status": "cannot_compare", "error": str(error), "first_divergence": None, "ops": []}

    def _compare_jobs(self):
        """The comparisons asked for (made on first use: its module imports the comparison's)."""
        from tvmdbg_tb.plugin.compare_jobs import CompareJobs

        with self._jobs_lock:
            if self._jobs is None:
                self._jobs = CompareJobs()
            return self._jobs
