import type { NextFunction, Request, RequestHandler, Response } from "express";
import { Admission, type LockAdmissionOptions, type SemaphoreAdmissionOptions } from "../../src/http/admission.js";
import { Exchange, type RequestLease } from "../../src/http/exchange.js";
import { reportHandlerEnd, sendRejection, watchNodeResponse } from "../../src/http/node-response.js";
import type { Rejection } from "../../src/http/problem.js";

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

/** Replaces the default problem response of a refused request. */
export type ExpressOnRejected = (req: Request, res: Response, rejection: Rejection, next: NextFunction) => void;

/** Options of the Express {@link semaphore} middleware. */
export interface ExpressSemaphoreOptions extends SemaphoreAdmissionOptions<Request> {
  /** Your own response to a refusal (default: the problem+json response). */
  onRejected?: ExpressOnRejected;
}

/** Options of the Express {@link lock} middleware. */
export interface ExpressLockOptions extends LockAdmissionOptions<Request> {
  /** Your own response to a refusal (default: the problem+json response). */
  onRejected?: ExpressOnRejected;
}

function middleware(admission: Admission<Request>, options: { onRejected?: unknown } | undefined): RequestHandler {
  const onRejected = options?.onRejected as ExpressOnRejected | undefined;
  if (onRejected !== undefined && typeof onRejected !== "function") {
    throw new TypeError("leasehold: `onRejected` must be a function (req, res, rejection, next).");
  }
  return function leasehold(req: Request, res: Response, next: NextFunction): void {
    const exchange = new Exchange(admission.disconnectGraceMs);
    watchNodeResponse(res, exchange, admission, () => ({
      key: req.lease?.key ?? admission.name,
      limit: req.lease !== undefined && "limit" in req.lease ? req.lease.limit : 1,
    }));
    // Express does not expose the handler's promise: ending the response is the sign its work is done.
    reportHandlerEnd(res, exchange);
    admission.admit(req, exchange).then((outcome) => {
      switch (outcome.type) {
        case "admitted":
          req.lease = outcome.lease;
          next();
          return;
        case "passed":
          next();
          return;
        case "rejected":
          if (onRejected !== undefined) onRejected(req, res, outcome.rejection, next);
          else sendRejection(res, outcome.rejection);
          return;
        case "abandoned":
          return;
      }
    }, next);
  };
}

/**
 * Express middleware that admits a request only while it holds one of
 * `limit` permits of `name` (or of `<name>:<key(req)>`). A full semaphore
 * answers 503 with Retry-After and a problem+json body. The permit is held
 * until the response is finished, and the handler reads it as `req.lease`,
 * whose `signal` aborts when it is lost or the client leaves. After a
 * disconnect the permit is held until the handler ends the response (or
 * calls `req.lease.release()`), at the latest `disconnectGraceMs`: Express
 * cannot see when a handler returns, so one that stops on abort should end
 * the response or release the lease.
 *
 * @example
 * ```ts
 * import { semaphore } from "leasehold/express";
 * app.post("/chat", semaphore("openai", 20, { client: redis, key: (req) => req.get("x-tenant-id") ?? "" }), async (req, res) => {
 *   res.json(await callModel(req.body, { signal: req.lease?.signal }));
 * });
 * ```
 */
export function semaphore(
  name: string,
  limit: number | ((req: Request) => number),
  options?: ExpressSemaphoreOptions,
): RequestHandler {
  return middleware(new Admission<Request>("semaphore", name, limit, options, "semaphore middleware", ["onRejected"]), options);
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
 * app.post("/orders/:id/pay", lock("order", { client: redis, key: (req) => req.params.id }), pay);
 * ```
 */
export function lock(name: string, options?: ExpressLockOptions): RequestHandler {
  return middleware(new Admission<Request>("lock", name, undefined, options, "lock middleware", ["onRejected"]), options);
}

export { PROBLEM_TYPES, type ProblemDetails, type RejectionReason } from "../../src/http/problem.js";
export type { Rejection, RequestLease };
