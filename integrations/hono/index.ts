import type { ServerResponse } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import type { LeaseLostError } from "../../src/errors.js";
import { Admission, type LockAdmissionOptions, type SemaphoreAdmissionOptions } from "../../src/http/admission.js";
import { Exchange, type RequestLease } from "../../src/http/exchange.js";
import { watchNodeResponse } from "../../src/http/node-response.js";
import { type Rejection, withoutStackTrace } from "../../src/http/problem.js";
import type { LockLease, SemaphoreLease } from "../../src/lease.js";

/**
 * What a refused request throws: an `HTTPException` whose `getResponse()` is
 * the problem+json response (503 or 409, Retry-After), so `app.onError` can
 * pass it on or reformat it. `rejection` has the details.
 *
 * @example
 * ```ts
 * app.onError((error, c) => {
 *   if (error instanceof LeaseRejectedException) return c.json({ busy: error.rejection.problem.key }, error.status);
 *   return error instanceof HTTPException ? error.getResponse() : c.text("oops", 500);
 * });
 * ```
 */
export class LeaseRejectedException extends HTTPException {
  readonly rejection: Rejection;

  constructor(rejection: Rejection) {
    super(rejection.status as HTTPException["status"], { message: rejection.problem.detail, cause: rejection.error });
    this.name = "LeaseRejectedException";
    this.rejection = rejection;
  }

  /** The problem+json response with its Retry-After, made when asked for (a `Response` is costly to build). */
  override getResponse(): Response {
    return problemResponse(this.rejection);
  }
}

function problemResponse(rejection: Rejection): Response {
  return new Response(JSON.stringify(rejection.problem), { status: rejection.status, headers: rejection.headers });
}

/** Your own response to a refusal, instead of throwing `LeaseRejectedException`. */
export type HonoOnRejected = (c: Context, rejection: Rejection) => Response | Promise<Response>;

/** Options of the Hono {@link semaphore} middleware. */
export interface HonoSemaphoreOptions extends SemaphoreAdmissionOptions<Context> {
  onRejected?: HonoOnRejected;
}

/** Options of the Hono {@link lock} middleware. */
export interface HonoLockOptions extends LockAdmissionOptions<Context> {
  onRejected?: HonoOnRejected;
}

/** The Node response behind a request served by `@hono/node-server`, if any. */
function nodeResponse(env: unknown): ServerResponse | undefined {
  const outgoing = (env as { outgoing?: unknown } | undefined)?.outgoing;
  return typeof outgoing === "object" && outgoing !== null && "writableFinished" in outgoing
    ? (outgoing as ServerResponse)
    : undefined;
}

/**
 * Off Node (Bun, Deno, Workers) there is no response object to watch: the
 * body stream is wrapped instead. Its end completes the response; its
 * cancellation means the client left.
 */
function holdBody(res: Response, exchange: Exchange, key: string): Response {
  if (res.body === null) {
    exchange.responded();
    return res;
  }
  const reader = res.body.getReader();
  let stop: ((error: unknown) => void) | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      stop = (error) => {
        controller.error(error);
        reader.cancel(error).catch(() => {});
        exchange.responded();
      };
    },
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          exchange.responded();
        } else {
          controller.enqueue(value);
        }
      } catch (error) {
        controller.error(error);
        exchange.responded();
      }
    },
    cancel(reason) {
      exchange.clientGone(key);
      return reader.cancel(reason);
    },
  });
  exchange.onLost = (error) => stop?.(error);
  return new Response(body, res);
}

function middleware(admission: Admission<Context>, options: { onRejected?: unknown } | undefined): MiddlewareHandler {
  const onRejected = options?.onRejected as HonoOnRejected | undefined;
  if (onRejected !== undefined && typeof onRejected !== "function") {
    throw new TypeError("leasehold: `onRejected` must be a function (c, rejection) returning a Response.");
  }
  return async function leasehold(c, next) {
    const exchange = new Exchange(admission.disconnectGraceMs);
    const outgoing = nodeResponse(c.env);
    let current = { key: admission.name, limit: 1 };
    if (outgoing !== undefined) watchNodeResponse(outgoing, exchange, admission, () => current);
    else {
      const signal = c.req.raw.signal;
      // Already aborted (the client left during an earlier middleware): no event will come.
      if (signal?.aborted) exchange.clientGone(current.key);
      else signal?.addEventListener("abort", () => exchange.clientGone(current.key), { once: true });
    }

    const outcome = await admission.admit(c, exchange);
    if (outcome.type === "rejected") {
      if (onRejected !== undefined) return onRejected(c, outcome.rejection);
      throw withoutStackTrace(() => new LeaseRejectedException(outcome.rejection));
    }
    if (outcome.type === "abandoned") return new Response(null, { status: 499 });
    if (outcome.type === "passed") {
      await next();
      return;
    }

    const lease = outcome.lease;
    current = { key: lease.key, limit: "limit" in lease ? lease.limit : 1 };
    c.set("lease", lease);
    // Until the handler has produced its response, a loss is answered with a 503 of our own.
    const lostFirst = new Promise<LeaseLostError>((resolve) => {
      exchange.onLost = resolve;
    });
    // The permit covers the handler until it settles, even if its client left or we answered first.
    exchange.workStarted();
    const handling = next();
    const workEnded = () => exchange.workEnded();
    handling.then(workEnded, workEnded);
    let handled: LeaseLostError | undefined;
    try {
      handled = await Promise.race([handling.then(() => undefined), lostFirst]);
    } catch (error) {
      if (outgoing === undefined) exchange.responded();
      throw error;
    }
    if (handled !== undefined) {
      exchange.onLost = () => {};
      // The handler may have finished in the same turn; our answer replaces its response whole
      // (clearing first, so Hono does not merge the handler's headers into it).
      c.res = undefined;
      c.res = problemResponse(admission.leaseLost(handled, current.key, current.limit));
      if (outgoing === undefined) exchange.responded();
      return;
    }
    // The response exists but its body may still be streaming: hold the lease until its last byte.
    if (outgoing !== undefined) {
      exchange.onLost = () => outgoing.destroy();
    } else {
      c.res = holdBody(c.res, exchange, current.key);
    }
  };
}

/**
 * Hono middleware that admits a request only while it holds one of `limit`
 * permits of `name` (or of `<name>:<key(c)>`). A full semaphore throws a
 * `LeaseRejectedException` (503, Retry-After, problem+json) for
 * `app.onError`. The permit is held until the handler has settled and the
 * response body is finished; the handler reads it as `c.get("lease")`. After
 * a disconnect it is held until the handler settles (or releases the lease),
 * at the latest `disconnectGraceMs`.
 *
 * @example
 * ```ts
 * import { semaphore } from "leasehold/hono";
 * app.post("/chat", semaphore("openai", 20, { client: redis, key: (c) => c.req.header("x-tenant-id") ?? "" }), async (c) => {
 *   return c.json(await callModel(await c.req.json(), { signal: c.get("lease")?.signal }));
 * });
 * ```
 */
export function semaphore(
  name: string,
  limit: number | ((c: Context) => number),
  options?: HonoSemaphoreOptions,
): MiddlewareHandler<{ Variables: { lease: SemaphoreLease | undefined } }> {
  return middleware(new Admission<Context>("semaphore", name, limit, options, "semaphore middleware", ["onRejected"]), options);
}

/**
 * Hono middleware that admits one request at a time per `name` (or per
 * `<name>:<key(c)>`); a held lock throws a 409 `LeaseRejectedException`.
 *
 * @example
 * ```ts
 * import { lock } from "leasehold/hono";
 * app.post("/orders/:id/pay", lock("order", { client: redis, key: (c) => c.req.param("id") ?? "" }), pay);
 * ```
 */
export function lock(
  name: string,
  options?: HonoLockOptions,
): MiddlewareHandler<{ Variables: { lease: LockLease | undefined } }> {
  return middleware(new Admission<Context>("lock", name, undefined, options, "lock middleware", ["onRejected"]), options);
}

export { PROBLEM_TYPES, type ProblemDetails, type RejectionReason } from "../../src/http/problem.js";
export type { Rejection, RequestLease };
