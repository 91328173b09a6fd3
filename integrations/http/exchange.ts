import type { ServerResponse } from "node:http";
import { ClientAbortedError, type LeaseLostError } from "../../src/errors/index.js";
import type { LeaseHandle } from "../../src/lease/handle.js";
import type { Lease, SemaphoreLease } from "../../src/lease/types.js";
import type { Rejection } from "./types.js";

/**
 * What admitting one request came to: its lease (admitted), a rejection to
 * answer, `"passed"` (skipped, or let through without a lease by
 * `onStoreError: "fail-open"`), or `"abandoned"` (the client left first).
 */
export type Admitted = LeaseView | Rejection | "passed" | "abandoned";

/** The response header that carries an admitted request's fence, with `exposeFence: true`. */
export const FENCE_HEADER = "Lease-Fence";

/**
 * What the exchange knows of the handler's work: nothing (no adapter reports
 * it, or not yet), running (its end will be reported), or ended.
 */
type Work = "unknown" | "running" | "ended";

/** Aborts a view's signal, if made; a module-private door, so handlers see no such method. */
// Declared before the classes whose static blocks assign them.
let abortView: (view: LeaseView, reason: Error) => void;
/** Ends an exchange whose handler released its lease itself; module-private, like `abortView`. */
let handedBack: (exchange: Exchange) => void;

function ignoreLoss(): void {}
function ignoreOutcome(): void {}

/**
 * One request/response pair as an admission sees it, and the one place that
 * decides when its permit is given back (`ended` resolves): the permit covers
 * the work's actual lifetime.
 *
 * - Normal path: once the response is complete (`responded()`) and, where the
 *   adapter reports it (`workStarted()` … `workEnded()`), the handler's work
 *   has ended. A streamed body keeps its permit until its last byte.
 * - The client disconnects (`clientGone()`): the handler's signal aborts at
 *   once; the permit follows when the work ends, or after `graceMs` if it has
 *   not by then (or is not reported at all). Giving it back under a handler
 *   that may still run is reported as a loss: `lease.lose()`, so the `lost`
 *   event, the metrics and `onLeaseLost` all hear of it.
 * - The adapter can no longer see the work's end (`workUnseen()`: Hono, when a
 *   middleware between the guard and the handler answered first): the same
 *   grace, counted from then, and the same report, with the cause it gives.
 * - At once when the lease is lost (nothing is held any more) or the handler
 *   releases it itself.
 *
 * It is also where the adapters find what the request asked for (`id`,
 * `limit`): the route's name until the admission has derived the id.
 * Adapters create it before any await, so no response event is missed.
 */
export class Exchange {
  /**
   * Resolves (with this exchange) when the permit may be given back: the engine's `run` releases it
   * then, once, and settles with it, so the admission hears of the end through a shared function.
   */
  readonly ended: Promise<Exchange>;
  /** The lease id this request asks for: the route's name until its key has been derived. */
  id: string;
  /** The limit of that id (1 for a lock, and until it is known). */
  limit = 1;
  /** The Node response behind the request, when the framework runs on Node's `http`. */
  response: ServerResponse | undefined;
  /**
   * Set by the adapter: what to do with the response when the lease is lost
   * mid-flight. Called as a method, so a shared function can read the exchange.
   */
  onLost: (this: Exchange, error: LeaseLostError) => void = ignoreLoss;
  /** The exchange of a leasehold middleware that admitted this request before this one (they may be stacked). */
  outer: Exchange | undefined;
  /** The handler's end is taken from the response's (Express: no handler promise to watch). */
  endsWithResponse = false;
  /**
   * Told the admission's outcome (`Admission.admitTo`), as a method so that a shared function reads
   * its request from the exchange; in the adapter's own call when the store answered at once. Must not throw.
   */
  admitted: (this: Exchange, outcome: Admitted) => void = ignoreOutcome;
  /** Told what `key`, `skip`, a limit function (or the engine, unexpectedly) threw instead of an outcome. Must not throw. */
  admitFailed: (this: Exchange, error: unknown) => void = ignoreOutcome;
  /** When the permit was granted (`performance.now()`), for the route's hold estimate. */
  admittedAt = -1;
  /** Set by the admission while the engine's call is on the stack: an outcome found then is told once it returns. */
  taking = false;
  /** That outcome, until then. */
  taken: Admitted | undefined;
  readonly #graceMs: number;
  #end!: (exchange: Exchange) => void;
  #done = false;
  #responded = false;
  #work: Work = "unknown";
  #grace: NodeJS.Timeout | undefined;
  /** What a loss at the grace's end is reported with: the departure, or what hid the work's end (`workUnseen`). */
  #graceCause: Error | undefined;
  /** The grace runs because the work's end could not be seen (`workUnseen`), not for a departure. */
  #unseen = false;
  // Signals are made only when someone asks for one: most requests never do,
  // and an AbortController per request is a measurable share of the overhead.
  #client: AbortController | undefined;
  #clientGone: ClientAbortedError | undefined;
  #failedWith: Error | undefined;
  // The handler's view and its lease, not closures over them: a closure stored here made V8
  // promote every request's objects out of the young generation in a server with a large heap.
  #view: LeaseView | undefined;
  #lease: LeaseHandle | undefined;
  #hook: ((error: LeaseLostError) => void) | undefined;

  /**
   * `name`: the route's, until the request's id is known; `graceMs`: how long
   * a handler may work on after its client left before its permit is taken back.
   */
  constructor(name: string, graceMs: number) {
    this.id = name;
    this.#graceMs = graceMs;
    this.ended = new Promise<Exchange>((resolve) => {
      this.#end = resolve;
    });
  }

  /** Aborts (with `ClientAbortedError`) when the client disconnects before the response finished. */
  get clientSignal(): AbortSignal {
    if (this.#client === undefined) {
      this.#client = new AbortController();
      if (this.#clientGone !== undefined) this.#client.abort(this.#clientGone);
    }
    return this.#client.signal;
  }

  /** True once the client disconnected before the response finished. */
  get gone(): boolean {
    return this.#clientGone !== undefined;
  }

  /**
   * True once the request is over for leasehold (answered, failed, its client gone, or its lease
   * lost): a grant that comes now must not start its handler.
   */
  get over(): boolean {
    return this.#done || this.gone;
  }

  /** The error that failed the request (see `failed`), if one did. */
  get failedWith(): Error | undefined {
    return this.#failedWith;
  }

  /** Why the client's side ended early, if it did. */
  get clientGoneReason(): ClientAbortedError | undefined {
    return this.#clientGone;
  }

  /** The response is complete: its last byte was written, or its body finished. Idempotent. */
  responded(): void {
    this.#responded = true;
    this.#settle();
  }

  /**
   * The adapter will report when the handler's work ends (`workEnded()`);
   * until then the permit is held, even past the response. True only for the
   * first caller, so that nested reporters (a class and a method decorator)
   * leave it to the outermost.
   */
  workStarted(): boolean {
    if (this.#work !== "unknown") return false;
    this.#work = "running";
    return true;
  }

  /**
   * The handler is called again for the same request, after its work ended
   * (an outer `retry()` subscribed to the adapter's interceptor again): its work runs again, and
   * the permit is held until it ends again. False when the permit is already
   * back (the response finished, or the lease was lost): the handler must
   * not run then. True when nothing was held (a skipped request).
   */
  workResumed(): boolean {
    if (this.#done) return this.#lease === undefined;
    this.#work = "running";
    return true;
  }

  /** True once the reported work has ended (and until it is resumed). */
  get workOver(): boolean {
    return this.#work === "ended";
  }

  /** The handler's work ended (settled, ended its response). Idempotent. */
  workEnded(): void {
    this.#work = "ended";
    this.#settle();
  }

  /**
   * The handler failed (Express: `next(error)`, or its promise rejected): its work is over, and so is
   * the request, whatever its response does next. The permit is given back now, and the connection
   * closing afterwards (Express's final handler destroys the socket of a response already started) is
   * not a client leaving: nothing is reported lost. Idempotent.
   */
  failed(error?: unknown): void {
    // Whoever failed the request, a handler still working is told: Express cannot say whether the
    // error came from the handler or from a middleware that failed the request around it (a timeout).
    if (this.#failedWith === undefined && !this.#done) {
      this.#failedWith = error instanceof Error ? error : new Error(String(error));
      if (this.#view !== undefined) abortView(this.#view, this.#failedWith);
    }
    this.#work = "ended";
    this.#responded = true;
    this.#settle();
  }

  /**
   * The adapter can no longer see when the handler's work ends (Hono: a middleware between the
   * guard and the handler answered first, with `cause`): the permit is held until the work is
   * reported ended, at most `graceMs` from now, then taken back and reported lost (with `cause`).
   * Never frees the permit earlier than the work's end would.
   */
  workUnseen(cause: Error | undefined): void {
    if (this.#done || this.#lease === undefined || this.#grace !== undefined) return;
    this.#graceCause = cause;
    this.#unseen = true;
    this.#grace = setTimeout(() => this.#graceOver(), this.#graceMs);
    this.#grace.unref();
  }

  /**
   * Told each reason the handler's signal aborts with (a lost lease, a departed client, a
   * shutdown) as it aborts, so that an adapter can answer it when the handler rethrows it. Does
   * nothing here; must not throw.
   */
  signalAborted(_reason: Error): void {}

  /** The client went away before the response finished: abort the handler's signal; the permit follows its work. */
  clientGone(): void {
    if (this.#responded || this.gone) return;
    const reason = new ClientAbortedError(this.id);
    this.#clientGone = reason;
    this.#client?.abort(reason);
    if (this.#view !== undefined) abortView(this.#view, reason);
    this.#settle();
  }

  /**
   * The handler's view of `lease`: same lease, with a signal that also
   * follows the client. `hook` (the route's `onLeaseLost`, bound to the
   * request) hears of a loss before the adapter answers it.
   */
  bind(lease: LeaseHandle & Partial<SemaphoreLease>, hook: ((error: LeaseLostError) => void) | undefined): LeaseView {
    const view = lease.limit === undefined ? new LeaseView(lease, this) : new SemaphoreLeaseView(lease, this);
    this.#view = view;
    this.#lease = lease;
    this.#hook = hook;
    lease.onLose((error) => this.#lost(error as LeaseLostError));
    return view;
  }

  #lost(error: LeaseLostError): void {
    if (this.#view !== undefined) abortView(this.#view, error);
    this.#hook?.(error);
    this.onLost(error);
    // Nothing is held any more: keeping the exchange open would only delay the (token-checked) release.
    this.#finish();
  }

  #settle(): void {
    if (this.#done) return;
    const work = this.#work;
    if (work === "ended" ? this.#responded || this.gone : work === "unknown" && this.#responded) {
      this.#finish();
    } else if (this.gone && this.#grace === undefined && this.#lease !== undefined) {
      // Only on a disconnect, so the normal path arms no timer.
      this.#grace = setTimeout(() => this.#graceOver(), this.#graceMs);
      this.#grace.unref();
    }
  }

  #graceOver(): void {
    if (this.#done) return;
    // The handler may still be working: giving its permit back now is a loss, and is reported as one,
    // with the departure (or what hid the work's end) as its cause.
    this.#lease?.lose(this.#graceCause ?? this.#clientGone, this.#unseen ? "end-unseen" : undefined);
    this.#finish();
  }

  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    if (this.#grace !== undefined) clearTimeout(this.#grace);
    this.#end(this);
  }

  static {
    handedBack = (exchange) => exchange.#finish();
  }
}

/**
 * What a handler holds as its lease. A class, not an object literal: V8
 * builds a literal with a getter slowly and in old space, which made the
 * garbage collector the largest cost of a guarded request (measured: 690 ns
 * per literal against 25 ns per instance, and mark-compacts under load).
 */
export class LeaseView implements Lease {
  readonly key: string;
  readonly token: string;
  readonly fence: number;
  readonly waitedMs: number;
  readonly #lease: LeaseHandle;
  readonly #exchange: Exchange;
  #combined: AbortController | undefined;

  constructor(lease: LeaseHandle, exchange: Exchange) {
    this.key = lease.key;
    this.token = lease.token;
    this.fence = lease.fence;
    this.waitedMs = lease.waitedMs;
    this.#lease = lease;
    this.#exchange = exchange;
  }

  /**
   * Aborts on a lost lease, a departed client, a shutdown (the middleware's
   * `close()`), or the request failing (Express: an error on its way to the
   * app's error handling), whichever comes first. Made on first use.
   */
  get signal(): AbortSignal {
    if (this.#combined === undefined) {
      this.#combined = new AbortController();
      const exchange = this.#exchange;
      const reason = this.#lease.lost ?? this.#lease.interrupted ?? exchange.clientGoneReason ?? exchange.failedWith;
      if (reason !== undefined) {
        this.#exchange.signalAborted(reason);
        this.#combined.abort(reason);
      }
      // Told here, and only for a handler that asked for its signal: nothing per request otherwise.
      else this.#lease.onInterrupt((why) => abortView(this, why));
    }
    return this.#combined.signal;
  }

  extend(ms?: number): Promise<boolean> {
    return this.#lease.extend(ms);
  }

  /** The handler's own choice: the permit is free at once and nothing more is held for this request. */
  release(): Promise<boolean> {
    const answer = this.#lease.release();
    handedBack(this.#exchange);
    return answer;
  }

  static {
    abortView = (view, reason) => {
      if (view.#combined === undefined || view.#combined.signal.aborted) return;
      view.#exchange.signalAborted(reason);
      view.#combined.abort(reason);
    };
  }
}

class SemaphoreLeaseView extends LeaseView implements SemaphoreLease {
  readonly limit: number;
  readonly weight: number;
  readonly tenant: string | undefined;

  constructor(lease: LeaseHandle & Partial<SemaphoreLease>, exchange: Exchange) {
    super(lease, exchange);
    this.limit = lease.limit ?? 1;
    this.weight = lease.weight ?? 1;
    this.tenant = lease.tenant;
  }
}
