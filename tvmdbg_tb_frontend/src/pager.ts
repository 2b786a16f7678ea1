/**
 * Fetches a long list in fixed-size pages, keeps the most recently used pages, and never asks
 * twice for a page already in flight. The list's rows are addressed by index; `get(i)` answers
 * what is cached and `ensure(begin, end)` loads what a view needs.
 */
export type PageFetcher<T> = (begin: number, end: number) => Promise<T[]>;

export class Pager<T> {
  private readonly pages = new Map<number, T[]>();
  private readonly inFlight = new Map<number, Promise<void>>();
  private generation = 0;
  /** Last error met while loading, cleared by a successful load. */
  error: Error | null = null;

  constructor(
    private readonly fetcher: PageFetcher<T>,
    readonly pageSize = 200,
    private readonly maxPages = 64,
    public total = 0,
  ) {
    if (pageSize < 1) throw new Error("pageSize must be >= 1");
  }

  /** The cached row at index i, or undefined when its page is not loaded. */
  get(i: number): T | undefined {
    const page = this.pages.get(Math.floor(i / this.pageSize));
    if (!page) return undefined;
    const row = page[i % this.pageSize];
    if (row !== undefined) this.touch(Math.floor(i / this.pageSize), page);
    return row;
  }

  /** Forgets every page (the underlying list changed); in-flight answers are dropped. */
  reset(total: number): void {
    this.generation += 1;
    this.pages.clear();
    this.inFlight.clear();
    this.total = total;
  }

  /**
   * A new total for a list that only grows (live runs): keeps complete pages and drops the
   * partial last page so that its new rows are fetched.
   */
  grow(total: number): void {
    if (total < this.total) {
      this.reset(total);
      return;
    }
    const lastPage = Math.floor(this.total / this.pageSize);
    if (this.total % this.pageSize !== 0) {
      this.pages.delete(lastPage);
      this.inFlight.delete(lastPage);
    }
    this.total = total;
  }

  /** Loads every page overlapping [begin, end); resolves when all are cached. */
  async ensure(begin: number, end: number): Promise<void> {
    const lo = Math.max(0, begin);
    const hi = Math.min(this.total, end);
    if (hi <= lo) return;
    const waits: Promise<void>[] = [];
    for (let p = Math.floor(lo / this.pageSize); p <= Math.floor((hi - 1) / this.pageSize); p++) {
      if (this.pages.has(p)) continue;
      waits.push(this.load(p));
    }
    await Promise.all(waits);
  }

  /** Whether the page holding row i is cached (its answer may hold fewer rows than asked:
   * a list that shrank). A view asks again only for pages not cached, so it never loops. */
  hasPage(i: number): boolean {
    return this.pages.has(Math.floor(i / this.pageSize));
  }

  /** Indices of every cached row (to find a row by content among what is loaded). */
  cachedRows(): number[] {
    const out: number[] = [];
    for (const [p, rows] of this.pages) for (let k = 0; k < rows.length; k++) out.push(p * this.pageSize + k);
    return out;
  }

  /** Pages currently cached (for tests and diagnostics). */
  cachedPages(): number[] {
    return [...this.pages.keys()];
  }

  private load(p: number): Promise<void> {
    const pending = this.inFlight.get(p);
    if (pending) return pending;
    const generation = this.generation;
    const begin = p * this.pageSize;
    const end = Math.min(this.total, begin + this.pageSize);
    const promise = this.fetcher(begin, end)
      .then((rows) => {
        if (generation !== this.generation) return;
        this.error = null;
        this.touch(p, rows);
        while (this.pages.size > this.maxPages) {
          const oldest = this.pages.keys().next().value as number;
          this.pages.delete(oldest);
        }
      })
      .catch((err: unknown) => {
        if (generation !== this.generation) return;
        this.error = err instanceof Error ? err : new Error(String(err));
        throw this.error;
      })
      .finally(() => {
        if (this.inFlight.get(p) === promise) this.inFlight.delete(p);
      });
    this.inFlight.set(p, promise);
    return promise;
  }

  private touch(p: number, rows: T[]): void {
    this.pages.delete(p);
    this.pages.set(p, rows);
  }
}
