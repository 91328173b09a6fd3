import { HTTPException } from "hono/http-exception";
import type { Rejection } from "../http/types.js";

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

/** A rejection as the problem+json `Response` it stands for. */
export function problemResponse(rejection: Rejection): Response {
  return new Response(JSON.stringify(rejection.problem), { status: rejection.status, headers: rejection.headers });
}
