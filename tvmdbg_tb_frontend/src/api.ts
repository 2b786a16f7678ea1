/** Typed access to the plugin's JSON routes (docs/routes.md). Relative URLs only: the iframe's
 * base is /data/plugin/tvmdbg/, which also works under --path_prefix. */

export type Num = number | "NaN" | "Infinity" | "-Infinity";

/** A node of an imported model graph (torch.fx, ONNX) that an op was converted from. */
export interface ModelNode {
  format: string;
  name: string;
  op_type: string;
  model_file: string;
  /** The model's module the node was made in ("model.layers.1.mlp"), "" when unknown. */
  module?: string;
}

/** The frame shown for something (docs/source-lines.md): the model's own line, the user's call
 * next to it when that line is a library's, the model node an op came from. An op of an ONNX
 * model without a recorded Python stack has no file_path: its node is its location. */
export interface Location {
  file_path?: string;
  line?: number;
  function?: string;
  called_from?: Location;
  model_node?: ModelNode;
}

/** A location that names a Python line. */
export type LineLocation = Location & { file_path: string; line: number; function: string };

export interface RunInfo {
  run: string;
  run_id: string | null;
  /** The name the user gave the run (enable_dump_debug_info(run_name=...)). */
  run_name?: string | null;
  /** A PyTorch eager reference (tvmdbg.record_torch_reference): Compare's default run B. */
  reference?: boolean;
  host_name: string | null;
  pid: number | null;
  tvmdbg_version: string | null;
  tvm_version: string | null;
  tensor_debug_mode: string | null;
  circular_buffer_size: number | null;
  argv: string[] | null;
  start_time: number | null;
  num_executions: number;
  num_traces: number;
  num_graphs: number;
  num_ops: number;
  num_alerts: number;
  first_origin_alert: number | null;
  /** Range alerts (FULL_STATS): outputs heading for their dtype's overflow. */
  num_range_alerts?: number;
  num_corruptions: number;
  last_update_time: number | null;
  live: boolean;
  completeness?: Completeness;
  /** The disco job and rank of the run (tvmdbg.disco), null for a lone process. */
  disco?: { job_id: string; rank: number; world_size: number } | null;
}

/** Whether a run's dump is complete (docs/routes.md#runs). */
export interface Completeness {
  complete: boolean;
  state: "complete" | "live" | "incomplete";
  ended: string;
  writer_alive: boolean | null;
  problems: { kind: string; message: string; file: string | null; offset: number | null; executions: (number | null)[] | null }[];
  /** Records the circular buffer dropped, by stream: not problems. */
  dropped: Record<string, number>;
  notes: string[];
}

export interface Corruption {
  path: string;
  offset: number;
  length: number;
  reason: string;
  message: string;
}

export interface Status {
  logdir: string;
  now: number;
  reader: { running: boolean; last_poll_time: number | null; poll_interval_s: number; polls: number; error: string | null };
  runs: {
    run: string;
    num_executions: number;
    num_traces: number;
    last_update_time: number | null;
    live: boolean;
    /** The reader is indexing the run right now. */
    indexing: boolean;
    /** Why the last read of this run failed (the reader retries). */
    error?: string | null;
    num_corruptions: number;
    corruptions: Corruption[];
    completeness: Completeness;
  }[];
  problems: string[];
}

export interface OriginalOp {
  op_type: string;
  var_name: string;
  location: Location | null;
}

export interface Alert {
  alert_type: string;
  op_id: number;
  op_name: string;
  kernel: string;
  graph_id: number;
  output_slot: number;
  nan_count: number;
  neg_inf_count: number;
  pos_inf_count: number;
  size: number | null;
  /** The output's dtype and shape as compiled (-1: a symbolic dimension). */
  dtype?: string | null;
  shape?: number[] | null;
  wall_time: number;
  execution_index: number;
  /** The call's function, which call of it in the run (1-based: a generation loop's step;
   *  null where dropped executions leave it uncounted) and how many calls of it the dump holds. */
  function_name?: string;
  call?: number | null;
  function_calls?: number;
  vm?: number;
  function_vms?: number;
  trace_index: number;
  execution_position: number | null;
  trace_position: number | null;
  origin: boolean;
  /** An origin next to damaged or missing records: the true origin may be what is missing. */
  origin_uncertain?: boolean;
  location: Location | null;
  original_ops: OriginalOp[];
  /** The function parameters the op read that held NaN/Inf in that call (a weight by its
   *  parameter name), and the objects it read (state earlier calls wrote: a KV cache). */
  bad_parameters?: AlertParameter[];
  state?: string[];
  /** How the inner op that made the value is known: "replay", "deep", "inner_check" (the
   *  kernel's own count) or "heuristic" (none known). */
  confirmed?: string;
  /** The Relax op inside the fused kernel that made the value (its line is `location`). */
  inner_op?: AlertInnerOp | null;
  /** The value was made inside a fused kernel whose output hides it. */
  masked?: boolean;
  /** Every fused op's NaN/Inf counts from the kernel's inner-op check (docs/inner_ops.md). */
  inner_nonfinite?: AlertInnerCount[];
}

export interface AlertParameter {
  name: string;
  param_index: number;
  /** The item of a tuple parameter (packed weights), null for the whole parameter. */
  tuple_item: number | null;
  /** A weight (past the function's num_input), not a data input. */
  weight: boolean;
}

export interface AlertInnerCount {
  index: number;
  op_type: string;
  var_name: string;
  location: Location | null;
  nan_count: number;
  neg_inf_count: number;
  pos_inf_count: number;
}

export interface AlertInnerOp {
  index: number;
  op_type: string;
  var_name: string;
  /** The PrimFunc the op was legalized to ("" when not known). */
  prim_func: string;
  location: Location | null;
}

export interface AlertsPage {
  begin: number;
  end: number;
  num_alerts: number;
  alerts_breakdown: Record<string, number>;
  /** The alert_type asked for (null: all). */
  alert_type: string | null;
  /** Counts over ALL alerts of the run, whatever page was asked for. */
  nan_alerts: number;
  neg_inf_alerts: number;
  pos_inf_alerts: number;
  origin_alerts: number;
  /** The dump lost the run's oldest records (circular buffer): the first alerts may be gone. */
  start_dropped: boolean;
  first_origin_index: number | null;
  alerts: Alert[];
  /** Outputs heading for overflow, before any inf (docs/range_alerts.md); absent from older servers. */
  range_alerts?: RangeAlerts;
  /** Non-finite outputs that are no alerts: absorbed (intended masking) or expected. */
  benign?: Benign;
  /** Non-finite outputs of calls that never returned (the program was killed, or is paused,
   *  inside them), recorded by the watchpoint hits that saw them; no place in the dump. */
  unfinished?: UnfinishedAlert[];
}

export interface UnfinishedAlert {
  op_id: number;
  op_name: string;
  kernel: string;
  output_slot: number;
  nan_count: number;
  neg_inf_count: number;
  pos_inf_count: number;
  size: number | null;
  execution_index: number;
  wall_time: number;
  location: Location | null;
  detail: string;
}

export interface RangeAlert {
  alert_type: "RangeAlert";
  kind: "near_max" | "growth";
  op_id: number;
  op_name: string;
  kernel: string;
  output_slot: number;
  dtype: string;
  dtype_max: number;
  abs_max: number;
  fraction_of_max: number;
  previous_abs_max: number | null;
  growth: number | null;
  calls_to_overflow: number | null;
  num_calls: number;
  peak_abs_max: number;
  execution_index: number;
  trace_index: number;
  trace_position: number;
  location: Location | null;
}

export interface RangeAlerts {
  available: boolean;
  headroom: number;
  growth_factor: number;
  growth_horizon: number;
  num_alerts: number;
  near_max_alerts: number;
  growth_alerts: number;
  begin: number;
  end: number;
  alerts: RangeAlert[];
}

export interface BenignOp {
  op_id: number;
  op_name: string;
  kernel: string;
  kind: "absorbed" | "expected";
  count: number;
  nan: number;
  neg_inf: number;
  pos_inf: number;
  original_ops: string[];
  location: Location | null;
  absorbed_by: string[];
}

export interface Benign {
  absorbed: number;
  expected: number;
  expected_nonfinite: string | null;
  ops: BenignOp[];
}

export interface Summary {
  dtype: string;
  shape: number[];
  debug_values: Num[];
  summary: Record<string, unknown>;
  has_value: boolean;
  /** A tuple's tensors, each summarised on its own. */
  items?: Summary[];
}

export interface ExecutionDigest {
  position: number;
  index: number;
  function_name: string;
  /** The how-manieth call of the function by its VM (a generation loop's step; 0: not recorded). */
  call_number: number;
  vm: number;
  graph_id: number;
  wall_time: number;
  duration_us: number | null;
  num_traces: number;
  has_error: boolean;
  nonfinite: boolean | null;
}

export interface ExecutionData extends ExecutionDigest {
  executable_id: string;
  tensor_debug_mode: string;
  error: string;
  inputs: Summary[];
  outputs: Summary[];
  location: Location | null;
  stack_frame_ids: number[];
  first_trace_position: number | null;
}

export interface TraceData {
  position: number;
  index: number;
  op_id: number;
  op_name: string;
  kernel: string;
  graph_id: number;
  output_slot: number;
  execution_index: number;
  wall_time: number;
  duration_us: number | null;
  nan: number;
  neg_inf: number;
  pos_inf: number;
  nonfinite: boolean | null;
  has_error: boolean;
  tensor_debug_mode: string;
  debug_values: Num[];
  summary: Record<string, unknown>;
  dtype: string;
  shape: number[];
  device: string;
  error: string;
  has_value: boolean;
}

/** A kernel trace of a live program's paused call (live/paused_call): the list's row shape,
 * with no place in the dump yet (position, index and wall time are null) and its place in
 * the call instead. */
export type PausedTrace = Omit<TraceData, "position" | "index" | "wall_time"> & {
  position: null;
  index: null;
  wall_time: null;
  call_position: number;
};

/** The answer to `POST live/keepalive`: the pause kept alive, or the news that it is over
 * (it ended after the state the panel shows was read; `now` is the current pause). */
export type KeepaliveAnswer =
  | { ok: boolean; pause_id: number; timeout: number; request_id: string }
  | { ok: boolean; pause_id: number; over: boolean; now: number | null; request_id: string };

export interface PausedCallPage {
  pause_id: number;
  execution_index: number;
  num_traces: number;
  begin: number;
  end: number;
  rows: PausedTrace[];
}

/** The `runs` route: the runs, and the one to open when the user has not picked one (the
 * CLI's rule, DebugDataReader.choose(); null until every run has been read once). */
export interface RunsList {
  runs: RunInfo[];
  default_run?: string | null;
  default_run_reason?: string;
}

export interface TensorSpec {
  name: string;
  dtype: string;
  shape: number[];
  shape_expr: string;
}

export interface Op {
  op_id: number;
  graph_id: number;
  op_name: string;
  kernel: string;
  call_type: string;
  position: number;
  device: string;
  location: Location | null;
  stack_frame_ids: number[];
  original_ops: OriginalOp[];
  outputs: TensorSpec[];
}

export interface Edge {
  src_op_id: number | null;
  src_output_slot: number;
  dst_op_id: number;
  dst_input_slot: number;
  kind: "OP_OUTPUT" | "PARAM" | "CONSTANT" | "OTHER";
  name: string;
  param_index: number | null;
  /** The item of a tuple parameter the edge reads (null: the whole value). */
  tuple_item: number | null;
}

export interface GraphSummary {
  graph_id: number;
  name: string;
  executable_id: string;
  source_mapped: boolean;
  instrumentation: string;
  target: string;
  note: string;
  num_ops: number;
  location: Location | null;
}

export interface GraphParam {
  index: number;
  name: string;
  dtype: string;
  shape: number[];
  shape_expr: string;
}

/** graphs/graph_info: a page [begin, end) of a function's ops (a small function comes whole). */
export interface GraphInfo extends GraphSummary {
  begin: number;
  end: number;
  params: GraphParam[];
  ops: Op[];
  edges: Edge[];
}

/** graphs/neighborhood: the ops around `center`, nearest first, bounded by depth and max_ops. */
export interface Neighborhood extends GraphSummary {
  center: number;
  whole: boolean;
  depth: number;
  ops: (Op & { distance: number | null })[];
  edges: Edge[];
  /** Ops shown that have neighbours left out. */
  frontier: number[];
  params: GraphParam[];
  /** With execution_index: each shown op's output-0 trace in that call, by op id. */
  execution_index?: number;
  health?: Record<string, TraceData>;
  param_health?: Record<string, Summary>;
}

/** One group of graphs/overview: consecutive ops [begin, end) of a function in call order. */
export interface OverviewGroup {
  index: number;
  begin: number;
  end: number;
  num_ops: number;
  first_op: { op_id: number; op_name: string; kernel: string };
  last_op: { op_id: number; op_name: string; kernel: string };
  op_types: { op_type: string; count: number }[];
  first_location: Location | null;
  last_location: Location | null;
  nonfinite_ops?: number;
  traced_ops?: number;
}

/** graphs/overview: a function (or a range of its ops) folded into groups. */
export interface Overview extends GraphSummary {
  begin: number;
  end: number;
  group_size: number;
  groups: OverviewGroup[];
  edges: { src: number; dst: number; count: number }[];
  execution_index?: number;
}

/** graphs/search: ops by name, kernel, Relax op type, model node or source line, best first. */
export interface SearchAnswer {
  query: string;
  num_matches: number;
  matches: { op: Op; graph_name: string; why: string; rank: number }[];
}

export interface OpInfo extends Op {
  inputs: {
    slot: number;
    kind: string;
    name: string;
    dtype: string;
    shape: number[];
    shape_expr: string;
    producer_op_id: number | null;
    producer_op_name: string | null;
    producer_output_slot: number | null;
    param_index: number | null;
    /** This input is item `tuple_item` of tuple parameter `param_index`. */
    tuple_item?: number | null;
    /** A constant's values summarised when it was compiled (its health), when recorded. */
    constant?: Summary | null;
  }[];
  consumers: { op_id: number; op_name: string; input_slot: number; output_slot: number }[];
  num_consumers: number;
  num_traces: number;
  latest: TraceData[];
  /** With execution_index: output-0 traces in that call of the op, its producers and consumers. */
  execution_index?: number;
  health?: Record<string, TraceData>;
}

export interface StackFrame {
  id: number;
  file_path: string;
  file_index: number;
  line: number;
  function: string;
}

/** source_files/file: lines [begin, end) of a file (line n is position n - 1), cut at 10,000
 * characters (`clipped`), the page ending early before 1 MiB of text. */
export interface SourceFile {
  index: number;
  host_name: string;
  file_path: string;
  num_lines: number;
  begin: number;
  end: number;
  lines: string[];
  clipped: { line: number; length: number }[];
}

/** source_files/op_lines: the ops lines [begin, end) of a file created (the first 20 a line). */
export interface OpLines {
  index: number;
  file_path: string;
  begin: number;
  end: number;
  lines: { line: number; num_ops: number; ops: { op_id: number; op_name: string; kernel: string; graph_id: number }[] }[];
}

export interface TensorValue {
  /** No slice was asked and the tensor did not fit: `slice` is the server's default view. */
  default_slice?: boolean;
  trace_position: number;
  trace_index: number;
  op_name: string;
  output_slot: number;
  dtype: string;
  shape: number[];
  slice: string;
  sliced_shape: number[];
  /** Per axis of `values`: position i is index start + i * step of dimension dim. */
  axes?: { dim: number; start: number; step: number }[];
  values: unknown;
  truncated: boolean;
  num_elements: number;
}

export interface Histogram {
  trace_position: number;
  trace_index: number;
  op_name: string;
  output_slot: number;
  dtype: string;
  shape: number[];
  num_elements: number;
  truncated: boolean;
  finite: number;
  nan: number;
  neg_inf: number;
  pos_inf: number;
  min: number | null;
  max: number | null;
  edges: number[];
  counts: number[];
}

/** One point of graph_execution/op_stats: one execution, or a bucket of consecutive ones. */
export interface StatsPoint {
  execution_index: number;
  last_execution_index: number;
  num_traces: number;
  min: number | null;
  max: number | null;
  mean: number | null;
  abs_max: number | null;
  nan: number;
  neg_inf: number;
  pos_inf: number;
}

export interface OpStats {
  op_id: number;
  op_name: string;
  output_slot: number;
  num_traces: number;
  bucketed: boolean;
  points: StatsPoint[];
}

export interface ProfileRow {
  op_id: number;
  op_name: string;
  kernel: string;
  graph_id: number;
  calls: number;
  total_us: number;
  mean_us: number;
  percent: number;
  dtype: string;
  shape: number[];
}

export interface Profile {
  total_us: number;
  num_executions: number;
  num_traces: number;
  rows: ProfileRow[];
}

export interface Paged {
  begin: number;
  end: number;
  num_digests: number;
}

/** An answer other than 2xx, with the backend's own message when it sent one. */
export class ApiError extends Error {
  constructor(
    readonly route: string,
    readonly status: number,
    message: string,
  ) {
    super(`${route}: ${status ? `HTTP ${status}: ` : ""}${message}`);
    this.name = "ApiError";
  }
}

/** Headers of every POST (live commands): the plugin refuses a POST without a JSON body and
 * this header, which a page of another site cannot send (docs/security.md). */
export const POST_HEADERS: Readonly<Record<string, string>> = {
  "Content-Type": "application/json",
  "X-Tvmdbg-Dashboard": "1",
};

export type FetchLike = (url: string) => Promise<{ ok: boolean; status: number; text(): Promise<string> }>;

/** A lone UTF-16 surrogate: a run directory named with bytes that are not UTF-8 reaches the
 * page with one (the server decodes file names with surrogateescape). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** A value URI-encoded; a lone surrogate, which encodeURIComponent refuses (URIError), is sent
 * as U+FFFD, as a URLSearchParams would, and the server finds the run by that name. */
export function uriEncode(value: string): string {
  return encodeURIComponent(value.replace(LONE_SURROGATE, "\ufffd"));
}

/** Builds "route?k=v&..." with every value URI-encoded and undefined values left out. */
export function routeUrl(route: string, params: Record<string, string | number | boolean | undefined | null> = {}): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null) continue;
    parts.push(`${uriEncode(k)}=${uriEncode(String(v))}`);
  }
  return parts.length ? `${route}?${parts.join("&")}` : route;
}

export class Api {
  constructor(private readonly fetchImpl: FetchLike = (url) => fetch(url)) {}

  async get<T>(route: string, params: Record<string, string | number | boolean | undefined | null> = {}): Promise<T> {
    const url = routeUrl(route, params);
    let response;
    try {
      response = await this.fetchImpl(url);
    } catch (err) {
      throw new ApiError(route, 0, `cannot reach TensorBoard (${err instanceof Error ? err.message : String(err)})`);
    }
    const text = await response.text();
    let body: unknown = undefined;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    if (!response.ok) {
      const message =
        body && typeof body === "object" && "error" in body
          ? String((body as { error: unknown }).error)
          : text.slice(0, 300) || "no answer";
      throw new ApiError(route, response.status, message);
    }
    if (body === undefined) throw new ApiError(route, response.status, "the answer is not JSON");
    return body as T;
  }

  runs() {
    return this.get<RunsList>("runs");
  }
  status(run?: string) {
    return this.get<Status>("status", { run });
  }
  alerts(run: string, begin: number, end: number) {
    return this.get<AlertsPage>("alerts", { run, begin, end });
  }
  /** find: the calls of one function only, or its VM's call of that number (a loop's step). */
  executionDigests(run: string, begin: number, end: number, find?: { function: string; call?: number }) {
    return this.get<Paged & { execution_digests: ExecutionDigest[] }>("execution/digests", {
      run,
      begin,
      end,
      function: find?.function,
      call: find?.call,
    });
  }
  executionData(run: string, begin: number, end: number) {
    return this.get<Paged & { executions: ExecutionData[] }>("execution/data", { run, begin, end });
  }
  traces(run: string, begin: number, end: number, executionIndex?: number) {
    return this.get<Paged & { graph_executions: TraceData[] }>("graph_execution/data", {
      run,
      begin,
      end,
      execution_index: executionIndex,
    });
  }
  /** An op's executions (of one call with `executionIndex`, or from the call `fromExecution` on). */
  opTraces(run: string, opId: number, begin: number, end: number, outputSlot?: number, executionIndex?: number, fromExecution?: number) {
    return this.get<{ op_id: number; op_name: string; begin: number; end: number; num_traces: number; traces: TraceData[] }>(
      "graph_execution/op_traces",
      {
        run,
        op_id: opId,
        begin,
        end,
        output_slot: outputSlot,
        execution_index: executionIndex,
        from_execution_index: fromExecution,
      },
    );
  }
  graphs(run: string) {
    return this.get<{ graphs: GraphSummary[] }>("graphs/list", { run });
  }
  graphInfo(run: string, graphId: number, begin?: number, end?: number) {
    return this.get<GraphInfo>("graphs/graph_info", { run, graph_id: graphId, begin, end });
  }
  neighborhood(run: string, opId: number, depth: number, maxOps: number, executionIndex?: number) {
    return this.get<Neighborhood>("graphs/neighborhood", {
      run,
      op_id: opId,
      depth,
      max_ops: maxOps,
      execution_index: executionIndex,
    });
  }
  overview(run: string, graphId: number, begin: number, end: number, maxGroups: number, executionIndex?: number) {
    return this.get<Overview>("graphs/overview", {
      run,
      graph_id: graphId,
      begin,
      end,
      max_groups: maxGroups,
      execution_index: executionIndex,
    });
  }
  search(run: string, q: string, limit = 30, graphId?: number) {
    return this.get<SearchAnswer>("graphs/search", { run, q, limit, graph_id: graphId });
  }
  opInfo(run: string, opId: number, executionIndex?: number) {
    return this.get<OpInfo>("graphs/op_info", { run, op_id: opId, execution_index: executionIndex });
  }
  sourceFiles(run: string) {
    return this.get<{ source_files: { index: number; file_path: string; host_name: string; num_lines: number }[] }>("source_files/list", {
      run,
    });
  }
  sourceFile(run: string, index: number, begin: number, end: number) {
    return this.get<SourceFile>("source_files/file", { run, index, begin, end });
  }
  opLines(run: string, index: number, begin: number, end: number) {
    return this.get<OpLines>("source_files/op_lines", { run, index, begin, end });
  }
  stackFrames(run: string, ids: number[]) {
    return this.get<{ stack_frames: StackFrame[] }>("stack_frames/stack_frames", { run, stack_frame_ids: ids.join(",") });
  }
  tensorValue(run: string, tracePosition: number, slice: string, maxElements = 10000) {
    return this.get<TensorValue>("tensor/value", { run, trace: tracePosition, slice: slice || undefined, max_elements: maxElements });
  }
  tensorHistogram(run: string, tracePosition: number, bins = 30) {
    return this.get<Histogram>("tensor/histogram", { run, trace: tracePosition, bins });
  }
  opStats(run: string, opId: number, outputSlot = 0, maxPoints = 500) {
    return this.get<OpStats>("graph_execution/op_stats", { run, op_id: opId, output_slot: outputSlot, max_points: maxPoints });
  }
  /** The kernels a live program's paused call ran so far (not in the dump until it returns). */
  pausedCall(run: string, begin: number, end: number) {
    return this.get<PausedCallPage>("live/paused_call", { run, begin, end });
  }
  profile(run: string, graphId?: number) {
    return this.get<Profile>("profile", { run, graph_id: graphId });
  }
}
