/**
 * Express (4 and 5) middleware: `semaphore(name, limit, options)` and `lock(name, options)`.
 *
 * @module leasehold/express
 */
import type { Application, NextFunction, Request, RequestHandler, Response } from "express";
import type { CloseOptions } from "../../src/options/types.js";
import { Admission } from "../http/admission.js";
import { parseAdmissionOptions } from "../http/config.js";
import { type Admitted, Exchange, FENCE_HEADER, LeaseView } from "../http/exchange.js";
import { handlerFailed, reportHandlerEnd, sendRejection, watchNodeResponse } from "../http/node-response.js";
import type {
  AdmissionRoute,
  Closable,
  LockAdmissionOptions,
  Rejection,
  RequestLease,
  SemaphoreAdmissionOptions,
} from "../http/types.js";

declare global {
  namespace Express {
    interface Request {
      /**
       * The lease this request holds, set by a leasehold middleware. Absent
       * when the request was skipped or let through by `onStoreError: "fail-open"`.
       */
      lease?: RequestLease;
    }
  }
}

/**
 * Replaces the default problem response of a refused request.
 *
 * @example
 * ```ts
 * const onRejected: ExpressOnRejected = (_req, res, rejection) => {
 *   res.status(429).set(rejection.headers).json({ busy: rejection.problem.key, retryAfter: rejection.retryAfter });
 * };
 * ```
 */
export type ExpressOnRejected = (req: Request, res: Response, rejection: Rejection, next: NextFunction) => void;

/**
 * Options of the Express {@link semaphore} middleware.
 *
 * @example
 * ```ts
 * const options: ExpressSemaphoreOptions = { client: redis, key: (req) => req.params.tenant ?? "shared", waitMs: 2_000 };
 * ```
 */
export interface ExpressSemaphoreOptions extends SemaphoreAdmissionOptions<Request, ExpressOnRejected> {}

/**
 * Options of the Express {@link lock} middleware.
 *
 * @example
 * ```ts
 * const options: ExpressLockOptions = { client: redis, key: (req) => String(req.params.id), ttlMs: 10_000 };
 * ```
 */
export interface ExpressLockOptions extends LockAdmissionOptions<Request, ExpressOnRejected> {}

/**
 * What {@link semaphore} and {@link lock} make: the middleware, and its
 * `close()` for a clean shutdown (see docs/operations.md, Shutting down).
 *
 * @example
 * ```ts
 * const chat: LeaseholdMiddleware = semaphore("openai", 20, { client: redis });
 * process.once("SIGTERM", async () => {
 *   await chat.close({ graceMs: 10_000 });
 *   server.close();
 * });
 * ```
 */
export type LeaseholdMiddleware = RequestHandler & Closable;

/** What a route's middleware reads per request. */
interface Route {
  readonly onRejected: ExpressOnRejected | undefined;
  readonly exposeFence: boolean;
}

/** One request through a leasehold middleware: its callbacks are shared functions reading it, not closures. */
class ExpressExchange extends Exchange {
  constructor(
    name: string,
    graceMs: number,
    readonly req: Request,
    readonly res: Response,
    readonly next: NextFunction,
    readonly route: Route,
  ) {
    super(name, graceMs);
    this.admitted = admitted as Exchange["admitted"];
    this.admitFailed = admitFailed as Exchange["admitFailed"];
  }
}

function admitFailed(this: ExpressExchange, error: unknown): void {
  this.next(error);
}

function admitted(this: ExpressExchange, outcome: Admitted): void {
  const { req, res, next, route } = this;
  try {
    if (outcome instanceof LeaseView) {
      req.lease = outcome;
      // Before the handler: a streamed body sends its headers with its first write.
      if (route.exposeFence) res.setHeader(FENCE_HEADER, String(outcome.fence));
      next();
    } else if (outcome === "passed") next();
    else if (outcome === "abandoned") return;
    else if (route.onRejected !== undefined) route.onRejected(req, res, outcome, next);
    else sendRejection(res, outcome);
  } catch (error) {
    // A throwing `onRejected` (or header write) is the route's error, not a lost request.
    next(error);
  }
}

/**
 * Express's error path, where a guarded request's handler failure is heard: Express exposes no
 * handler promise, but passes a failure to `next(error)` (Express 5 also passes an async handler's
 * rejection there), and an error that no middleware of the app answers ends in Express's final
 * handler, which destroys the socket of a response already started. Without this, that read as a
 * client leaving: the permit was kept for `disconnectGraceMs` and then reported lost. Here the
 * request ends at once, leasehold's own abort reasons get their documented answer (and are not
 * logged as bugs), and every other error goes on to the app's final handler unchanged.
 */
function leaseholdErrors(error: unknown, _req: Request, res: Response, next: NextFunction): void {
  if (!handlerFailed(res, error)) next(error);
}

/** The apps {@link leaseholdErrors} was added to. */
const withErrors = new WeakSet<Application>();

/**
 * Adds {@link leaseholdErrors} to the end of `app`'s stack, once per app, on its first guarded
 * request: after the error middlewares the app registered when it was set up, so they see every
 * error first, and ours sees only the errors they passed on. Mounted sub-apps get their own.
 */
function hearFailures(app: Application | undefined): void {
  if (app === undefined || withErrors.has(app)) return;
  withErrors.add(app);
  app.use(leaseholdErrors);
}

function middleware(route: AdmissionRoute<Request, ExpressOnRejected>, where: string): LeaseholdMiddleware {
  const admission = new Admission(parseAdmissionOptions(route, where));
  const { config } = admission;
  const { name, disconnectGraceMs } = config;
  const settings: Route = { onRejected: config.onRejected, exposeFence: config.exposeFence };
  // The app last seen: most middlewares serve one app, so most requests skip the set look-up.
  let seen: Application | undefined;
  const handler = function leasehold(req: Request, res: Response, next: NextFunction): void {
    if (req.app !== seen) {
      seen = req.app;
      hearFailures(seen);
    }
    const exchange = new ExpressExchange(name, disconnectGraceMs, req, res, next, settings);
    watchNodeResponse(res, exchange);
    // Express does not expose the handler's promise: ending the response is the sign its work is done.
    reportHandlerEnd(res, exchange);
    // On the embedded store the handler runs within this call: no promise, no tick.
    admission.admitTo(req, exchange);
  };
  return Object.assign(handler, { close: (options?: CloseOptions) => admission.close(options) });
}

/**
 * Express middleware that admits a request only while it holds one of
 * `limit` permits of `name` (or of `<name>:<key(req)>`). A full semaphore
 * answers 503 with Retry-After and a problem+json body. The permit is held
 * until the response is finished, and the handler reads it as `req.lease`,
 * whose `signal` aborts when it is lost, the client leaves, or the
 * middleware is closed (`close()`, for a clean shutdown). After a
 * disconnect the permit is held until the handler ends the response,
 * calls `req.lease.release()` or fails, at the latest `disconnectGraceMs`:
 * Express cannot see when a handler returns, so one that stops on abort
 * should end the response, release the lease, or let the signal's reason
 * propagate (`next(error)`; in Express 5, a throw in an async handler). A
 * handler that fails returns its permit at once, and leasehold's own abort
 * reasons are answered as documented (503 `shutting-down` or `lease-lost`;
 * nothing for a client that left): the middleware adds one error-handling
 * middleware to the end of the app for that (see docs/adapters.md).
 *
 * @example
 * ```ts
 * import { semaphore } from "leasehold/express";
 *
 * // 20 calls in flight per tenant; a request without a tenant header is not limited per tenant.
 * const perTenant = semaphore("openai", 20, {
 *   client: redis,
 *   skip: (req) => !req.get("x-tenant-id"),
 *   key: (req) => req.get("x-tenant-id")!,
 * });
 * app.post("/chat", perTenant, async (req, res) => {
 *   res.json(await callModel(req.body, { signal: req.lease?.signal }));
 * });
 * ```
 */
export function semaphore(
  name: string,
  limit: number | ((req: Request) => number),
  options?: ExpressSemaphoreOptions,
): LeaseholdMiddleware {
  return middleware({ kind: "semaphore", name, limit, options }, "semaphore middleware");
}

/**
 * Express middleware that admits one request at a time per `name` (or per
 * `<name>:<key(req)>`). A held lock answers 409 with Retry-After and a
 * problem+json body. Held until the response is finished; after a
 * disconnect, as for {@link semaphore}.
 *
 * @example
 * ```ts
 * import { lock } from "leasehold/express";
 * app.post("/orders/:id/pay", lock("order", { client: redis, key: (req) => String(req.params.id) }), pay);
 * ```
 */
export function lock(name: string, options?: ExpressLockOptions): LeaseholdMiddleware {
  return middleware({ kind: "lock", name, options }, "lock middleware");
}

export type { LockLease, SemaphoreLease } from "../../src/lease/types.js";
export type { CloseOptions } from "../../src/options/types.js";
export { PROBLEM_TYPES } from "../http/problem.js";
export type { Closable, ProblemDetails, ProblemType, RejectionContext, RejectionReason } from "../http/types.js";
export type { Rejection, RequestLease };
