import type { ServerResponse } from "node:http";
import type { LeaseLostError } from "../errors.js";
import type { Admission, Exchange } from "./admission.js";
import type { Rejection } from "./problem.js";

/** Writes a rejection as an `application/problem+json` response, with plain Node APIs (Express 4 and 5 alike). */
export function sendRejection(res: ServerResponse, rejection: Rejection): void {
  res.statusCode = rejection.status;
  for (const [name, value] of Object.entries(rejection.headers)) res.setHeader(name, value);
  res.end(JSON.stringify(rejection.problem));
}

/**
 * Ties an exchange to a Node response: the lease is released when the last
 * byte is written (`finish`) or the connection goes first (`close` before
 * `finish`: the client left). A lease lost before the response starts is
 * answered 503; during a body, the response is destroyed, so the client sees
 * a cut stream rather than a complete-looking one and the over-limit work stops.
 * Call before any await, so no event is missed.
 */
export function watchNodeResponse<Req>(
  res: ServerResponse,
  exchange: Exchange,
  admission: Admission<Req>,
  current: () => { key: string; limit: number },
): void {
  res.once("finish", () => exchange.end());
  res.once("close", () => {
    if (res.writableFinished) exchange.end();
    else exchange.clientGone(current().key);
  });
  exchange.onLost = (error: LeaseLostError) => {
    if (res.headersSent || res.writableEnded) {
      res.destroy(error);
      return;
    }
    const { key, limit } = current();
    sendRejection(res, admission.leaseLost(error, key, limit));
  };
}
