/**
 * The dashboard's state: the run, and what is selected (a kernel execution, its op, a frame).
 * Panels read it and listen for changes; every async answer is checked against a sequence
 * number so that a slow answer for an older selection never overwrites a newer one.
 */
import type { Api, ExecutionData, GraphSummary, OpInfo, RunInfo, StackFrame, TraceData } from "./api";
import type { Health } from "./format";

export type StoreEvent = "runs" | "run" | "trace" | "op" | "frame" | "execution" | "error" | "alerts" | "pause";

/** Where a live program is paused (the Live panel's state): a kernel that ran in a call the
 * dump does not hold yet (a call is written when it returns). */
export interface PauseInfo {
  pauseId: number;
  opId: number;
  graphId: number;
  opName: string;
  kernel: string;
  functionName: string;
  executionIndex: number;
  reason: string;
  /** Non-finite counts of the kernel's outputs, as the program sees them. */
  nonfinite: { slot: number; nan: number; negInf: number; posInf: number }[];
  source: { file_path: string; line: number; function: string } | null;
  /** Kernel traces the paused call has so far (live/paused_call lists them), and the paused
   * kernel's first among them (null: the kernel is not traced). */
  callTraces: number;
  callRow: number | null;
  /** The paused kernel's inputs and outputs as the program sees them (the Live panel's), in
   * the kernel's argument order: what the op details show while the dump lacks the call. */
  inputs: PausedTensor[];
  outputs: PausedTensor[];
}

export interface PausedTensor {
  name: string;
  dtype: string | null;
  shape: number[] | null;
  health: Health | null;
}

/** graph_execution/data's page limit. */
const TRACE_PAGE = 1000;

export interface ShownFrame {
  file_path: string;
  file_index: number;
  line: number;
  function: string;
}

export class Store {
  runs: RunInfo[] = [];
  run: string | null = null;
  /** Position of the selected kernel execution (graph execution trace) in the dump. */
  tracePosition: number | null = null;
  trace: TraceData | null = null;
  op: OpInfo | null = null;
  /** Frames of the selected op's creation stack, outermost first, as recorded. */
  frames: StackFrame[] = [];
  /** The frame whose file the source panel shows. */
  frame: ShownFrame | null = null;
  /** Selected top-level execution: its position in execution/digests when selected and its
   * monotonic index (what identifies it while a circular buffer shifts positions). */
  executionPosition: number | null = null;
  executionIndex: number | null = null;
  /** The selected trace of the paused call (its place in live/paused_call), when the selection
   * is a kernel the dump does not hold yet; tracePosition is null then. */
  pausedRow: number | null = null;
  errors: { when: number; message: string }[] = [];
  /** Execution indices with a NaN/Inf alert (among the alerts loaded), for timeline markers. */
  alertExecutions = new Set<number>();
  /** The run's first origin alert (the first bad call), where the timeline and the kernel list
   * open when a run with alerts is loaded; set by the alerts panel before it emits "alerts". */
  firstBad: { executionIndex: number; executionPosition: number | null; tracePosition: number | null } | null = null;
  /** The run to open when none is chosen (the backend's `default_run`), and why. */
  defaultRun: string | null = null;
  defaultReason = "";
  /** Whether the shown run was chosen: picked by the user, a live run that started, or the
   * default once known (until then the dashboard shows a stand-in). */
  private runChosen = false;
  /** The live program's pause, while it is paused (set by the Live panel). */
  pause: PauseInfo | null = null;
  /** Refreshes the runs list now (set by render(); a pause flushes the dump, so the counts,
   * timeline and alerts catch up at once rather than at the next poll). */
  refresh: () => void = () => undefined;

  private seq = 0;
  private executions = new Map<string, Promise<ExecutionData | null>>();
  private graphList: { key: string; promise: Promise<GraphSummary[]> } | null = null;
  private listeners = new Map<StoreEvent, Set<() => void>>();

  constructor(readonly api: Api) {}

  on(event: StoreEvent, fn: () => void): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(fn);
    return () => set!.delete(fn);
  }

  emit(event: StoreEvent): void {
    for (const fn of [...(this.listeners.get(event) ?? [])]) {
      try {
        fn();
      } catch (err) {
        if (event !== "error") this.reportError(err);
        else console.warn(err);
      }
    }
  }

  get runInfo(): RunInfo | null {
    return this.runs.find((r) => r.run === this.run) ?? null;
  }

  /** Shows an error in the error bar (backend errors are shown, never swallowed). */
  reportError(err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    this.errors = [...this.errors.filter((e) => e.message !== message), { when: Date.now(), message }].slice(-5);
    this.emit("error");
  }

  dismissErrors(): void {
    this.errors = [];
    this.emit("error");
  }

  /**
   * The top-level call with monotonic `index` (its inputs' summaries give the health of the
   * function's parameters), or null when it is no longer in the dump. Kept calls have
   * consecutive indices, so its position is `index` minus the oldest kept call's index.
   */
  executionByIndex(index: number): Promise<ExecutionData | null> {
    const run = this.run;
    if (run === null) return Promise.resolve(null);
    const key = `${run}|${index}`;
    let p = this.executions.get(key);
    if (!p) {
      p = (async () => {
        const oldest = (await this.api.executionDigests(run, 0, 1)).execution_digests[0];
        const position = oldest ? index - oldest.index : -1;
        if (position < 0) return null;
        const ex = (await this.api.executionData(run, position, position + 1)).executions[0];
        return ex && ex.index === index ? ex : null;
      })();
      p.catch(() => this.executions.delete(key));
      this.executions.set(key, p);
    }
    return p;
  }

  /** The run's compiled functions (graphs/list: names and op counts), fetched once, and again
   * when a live program compiles more. */
  graphs(): Promise<GraphSummary[]> {
    const run = this.run;
    if (run === null) return Promise.resolve([]);
    const key = `${run}|${this.runInfo?.num_ops ?? 0}|${this.runInfo?.num_graphs ?? 0}`;
    if (this.graphList?.key !== key) {
      const promise = this.api.graphs(run).then((g) => g.graphs);
      promise.catch(() => {
        if (this.graphList?.promise === promise) this.graphList = null;
      });
      this.graphList = { key, promise };
    }
    return this.graphList.promise;
  }

  /**
   * A new runs list, with the backend's default run (DebugDataReader.choose(): the CLI's rule;
   * null until every run was read once) and why. The selection stays on a run the user picked;
   * a run that appears while the page is open and is live (a program just started) is selected,
   * so the user sees it without looking for it; otherwise the default run, once it is known
   * (until then the newest live run, else the newest run stands in).
   */
  setRuns(runs: RunInfo[], defaultRun: string | null = null, defaultReason = ""): void {
    const known = new Set(this.runs.map((r) => r.run));
    const first = this.runs.length === 0 && this.run === null;
    this.runs = runs;
    const listed = (name: string | null) => name !== null && runs.some((r) => r.run === name);
    this.defaultRun = listed(defaultRun) ? defaultRun : null;
    this.defaultReason = this.defaultRun !== null ? defaultReason : "";
    const previous = this.run;
    const fresh = runs.filter((r) => (first || !known.has(r.run)) && r.live);
    if (fresh.length) {
      this.run = fresh[fresh.length - 1].run;
      this.runChosen = true; // the program that just started is what the user came for
    } else if (!this.runChosen && this.defaultRun !== null) {
      this.run = this.defaultRun;
      this.runChosen = true; // chosen once: a later change of the default never moves the view
    } else if (!listed(this.run)) this.run = this.defaultRun ?? (runs.length ? runs[runs.length - 1].run : null);
    // A new run is selected first, so that the panels reading "runs" see it set up (each of
    // them would otherwise load the new run's first page twice).
    if (this.run !== previous) this.selectRun(this.run);
    this.emit("runs");
  }

  /** The user picked a run in the picker: it stays selected (no default overrides it). */
  pickRun(run: string): void {
    this.runChosen = true;
    if (run !== this.run) this.selectRun(run); // the run shown again: its state stays
  }

  /** The live program paused (or resumed: null). A new pause is the current state of every
   * panel: its op is selected (graph, source, op details), and the kernel execution too once
   * the dump holds it. */
  setPause(pause: PauseInfo | null): void {
    const changed = (pause?.pauseId ?? null) !== (this.pause?.pauseId ?? null);
    this.pause = pause;
    if (!changed) return;
    if (this.pausedRow !== null) {
      // The paused call's rows belong to the pause that ended (the dump holds them once the call returns).
      this.pausedRow = null;
      this.emit("trace");
    }
    this.emit("pause");
    if (pause) {
      void this.goToPause(pause);
      setTimeout(() => this.refresh(), 1200); // the plugin reads the flushed records within ~1 s
    }
  }

  /** Selects where the program is paused (the Live panel's and the alerts' links). */
  async goToPause(pause: PauseInfo): Promise<void> {
    const run = this.run;
    if (run === null) return;
    try {
      // Not cached: a paused call grows kernel by kernel (a step pauses in the same call).
      const page = await this.api.traces(run, 0, TRACE_PAGE, pause.executionIndex);
      // The same pause read again by the Live panel's poll is a new object: compare ids.
      if (this.run !== run || this.pause?.pauseId !== pause.pauseId) return;
      const own = page.graph_executions.filter((t) => t.op_id === pause.opId);
      const latest = own.length ? own[own.length - 1] : undefined;
      if (latest) await this.selectTrace(latest.position, latest.index);
      else if (pause.callRow !== null) await this.selectPausedTrace(pause.callRow, pause.opId);
      else await this.selectOp(pause.opId);
      if (this.pause?.pauseId === pause.pauseId && pause.source)
        this.showFrame({ file_path: pause.source.file_path, file_index: -1, line: pause.source.line, function: pause.source.function });
    } catch (err) {
      this.reportError(err);
    }
  }

  selectRun(run: string | null): void {
    this.run = run;
    this.seq += 1;
    this.executions.clear();
    this.graphList = null;
    this.alertExecutions = new Set();
    this.firstBad = null;
    this.pause = null;
    this.tracePosition = null;
    this.trace = null;
    this.op = null;
    this.frames = [];
    this.frame = null;
    this.executionPosition = null;
    this.executionIndex = null;
    this.pausedRow = null;
    this.emit("run");
    this.emit("trace");
    this.emit("op");
    this.emit("frame");
  }

  /**
   * Selects the kernel execution at `position`, then loads its op, creation stack and source.
   * `index` is the trace's monotonic index when known: a circular buffer shifts positions, so
   * the answer is checked against it (and the position corrected once) rather than trusted.
   */
  async selectTrace(position: number, index?: number): Promise<void> {
    const run = this.run;
    if (run === null) return;
    const seq = ++this.seq;
    this.tracePosition = position;
    this.pausedRow = null;
    this.emit("trace");
    try {
      let trace = await this.traceAt(run, position);
      if (index !== undefined && trace?.index !== index && trace) {
        const corrected = position + (index - trace.index);
        trace = corrected >= 0 ? await this.traceAt(run, corrected) : undefined;
        if (seq !== this.seq) return;
        if (trace?.index !== index) throw new Error(`kernel execution #${index} is no longer in the dump (the circular buffer dropped it)`);
        this.tracePosition = corrected;
      }
      if (seq !== this.seq) return;
      if (!trace) throw new Error(`no kernel execution at position ${position}`);
      this.trace = trace;
      this.emit("trace");
      await this.loadOp(seq, run, trace.op_id, trace.execution_index);
    } catch (err) {
      if (seq === this.seq) this.reportError(err);
    }
  }

  private async traceAt(run: string, position: number): Promise<TraceData | undefined> {
    return (await this.api.traces(run, position, position + 1)).graph_executions[0];
  }

  /**
   * One navigation model for every link to an op (input, consumer, graph node, search result,
   * profile row, source mark): selects an execution of it, so every panel moves to the same
   * call and op (the timeline's call, the list's row, the op's health, the graph, the source).
   * The execution is the one in the selected kernel's call (the producer that fed it, the
   * consumer that used it); for an op of another function, its first execution from that call
   * on (the same step of a loop), else its last before; with nothing selected, its first.
   * Only an op never traced is selected without one.
   */
  async goToOp(opId: number): Promise<void> {
    const run = this.run;
    if (run === null) return;
    const current = this.trace;
    const at = current?.execution_index ?? this.executionIndex ?? undefined;
    try {
      const pick = async (): Promise<TraceData | undefined> => {
        if (at === undefined) return (await this.api.opTraces(run, opId, 0, 1)).traces[0];
        const same = (await this.api.opTraces(run, opId, 0, 1, 0, at)).traces[0];
        if (same) return same;
        const later = (await this.api.opTraces(run, opId, 0, 1, 0, undefined, at)).traces[0];
        if (later) return later;
        const all = await this.api.opTraces(run, opId, 0, 0, 0);
        return all.num_traces ? (await this.api.opTraces(run, opId, all.num_traces - 1, all.num_traces, 0)).traces[0] : undefined;
      };
      const trace = await pick();
      if (this.run !== run) return;
      if (trace) return await this.selectTrace(trace.position, trace.index);
    } catch (err) {
      this.reportError(err);
    }
    await this.selectOp(opId);
  }

  /** Selects an op without a particular execution (an op that was never traced, or one of a
   * call not written yet). */
  async selectOp(opId: number): Promise<void> {
    const run = this.run;
    if (run === null) return;
    const seq = ++this.seq;
    this.tracePosition = null;
    this.trace = null;
    this.pausedRow = null;
    this.emit("trace");
    try {
      await this.loadOp(seq, run, opId);
    } catch (err) {
      if (seq === this.seq) this.reportError(err);
    }
  }

  /** Selects a kernel trace of the paused call (row `row` of live/paused_call, of op `opId`):
   * the dump does not hold it yet, so the kernel list marks it and the other panels show its op. */
  async selectPausedTrace(row: number, opId: number): Promise<void> {
    const run = this.run;
    if (run === null || this.pause === null) return;
    const seq = ++this.seq;
    this.tracePosition = null;
    this.trace = null;
    this.pausedRow = row;
    this.emit("trace");
    try {
      await this.loadOp(seq, run, opId);
    } catch (err) {
      if (seq === this.seq) this.reportError(err);
    }
  }

  /** Loads the op (with the health of its producers and consumers in the call `executionIndex`
   * when given) and, for a new op, its creation stack; then shows its frame. */
  private async loadOp(seq: number, run: string, opId: number, executionIndex?: number): Promise<void> {
    const sameOp = this.op?.op_id === opId;
    if (!sameOp || this.op?.execution_index !== executionIndex) {
      const op = await this.api.opInfo(run, opId, executionIndex);
      if (seq !== this.seq) return;
      if (!sameOp) {
        const frames = op.stack_frame_ids.length ? (await this.api.stackFrames(run, op.stack_frame_ids)).stack_frames : [];
        if (seq !== this.seq) return;
        this.frames = frames;
      }
      this.op = op;
    }
    this.emit("op");
    const loc = this.op!.location;
    const userFrame = loc ? (this.frames.find((f) => f.file_path === loc.file_path && f.line === loc.line) ?? null) : null;
    this.frame = userFrame ?? (this.frames.length ? this.frames[this.frames.length - 1] : null);
    this.emit("frame");
  }

  showFrame(frame: ShownFrame): void {
    this.frame = frame;
    this.emit("frame");
  }

  selectExecution(position: number, index: number): void {
    this.executionPosition = position;
    this.executionIndex = index;
    this.emit("execution");
  }

  /** A call picked on the timeline: every panel moves to it (graph, op, source, stack): the
   * selected op's run in that call when it ran there, else the call's first kernel. */
  async selectCall(position: number, index: number): Promise<void> {
    this.selectExecution(position, index);
    const run = this.run;
    if (run === null) return;
    try {
      const opId = this.op?.op_id;
      const same = opId === undefined ? undefined : (await this.api.opTraces(run, opId, 0, 1, 0, index)).traces[0];
      const trace = same ?? (await this.api.traces(run, 0, 1, index)).graph_executions[0];
      if (this.run !== run || this.executionIndex !== index || !trace) return;
      await this.selectTrace(trace.position, trace.index);
    } catch (err) {
      this.reportError(err);
    }
  }
}
