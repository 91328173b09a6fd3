import type { ServerResponse } from "node:http";
import type { LeaseLostError } from "../errors.js";
import type { Admission } from "./admission.js";
import type { Exchange } from "./exchange.js";
import type { Rejection } from "./problem.js";

/** Writes a rejection as an `application/problem+json` response, with plain Node APIs (Express 4 and 5 alike). */
export function sendRejection(res: ServerResponse, rejection: Rejection): void {
  res.statusCode = rejection.status;
  for (const [name, value] of Object.entries(rejection.headers)) res.setHeader(name, value);
  res.end(JSON.stringify(rejection.problem));
}

/**
 * Ties an exchange to a Node response: the response is complete when its
 * last byte is written (`finish`); the connection closing first means the
 * client left. A lease lost before the response starts is answered 503;
 * during a body, the response is destroyed, so the client sees a cut stream
 * rather than a complete-looking one and the over-limit work stops. Once the
 * client has left there is nobody to answer. Call before any await, so no
 * event is missed; a connection already closed counts as closing now.
 */
export function watchNodeResponse<Req>(
  res: ServerResponse,
  exchange: Exchange,
  admission: Admission<Req>,
  current: () => { key: string; limit: number },
): void {
  const closed = () => {
    if (res.writableFinished) exchange.responded();
    else exchange.clientGone(current().key);
  };
  res.once("finish", () => exchange.responded());
  res.once("close", closed);
  // A client that left during an earlier step (an auth call, a body parser) emits nothing more:
  // without this the request would be admitted and its permit kept for a response nobody reads.
  if (res.destroyed) closed();
  exchange.onLost = (error: LeaseLostError) => {
    if (exchange.gone) return;
    if (res.headersSent || res.writableEnded) {
      res.destroy(error);
      return;
    }
    const { key, limit } = current();
    sendRejection(res, admission.leaseLost(error, key, limit));
  };
}

const EXCHANGE = Symbol("leasehold:exchange");
const END = Symbol("leasehold:end");

/** A response whose `end` reports to its exchange: plain references on it, no closure per request. */
interface Reporting extends ServerResponse {
  [EXCHANGE]: Exchange;
  [END]: (...args: unknown[]) => ServerResponse;
}

function reportingEnd(this: Reporting, ...args: unknown[]): ServerResponse {
  this[EXCHANGE].workEnded();
  return this[END].apply(this, args);
}

function finishEndsWork(this: Reporting): void {
  this[EXCHANGE].workEnded();
}

/**
 * For frameworks that do not expose the handler's promise (Express): the
 * handler's work is taken to have ended when it ends the response. `end` is
 * wrapped on this response object only (`send`, `json`, `sendFile` and
 * pipes all call it), and `finish` counts too, should something bypass it.
 * Call before any await.
 */
export function reportHandlerEnd(res: ServerResponse, exchange: Exchange): void {
  exchange.workStarted();
  const reporting = res as Reporting;
  reporting[EXCHANGE] = exchange;
  reporting[END] = res.end as Reporting[typeof END];
  res.end = reportingEnd as ServerResponse["end"];
  res.once("finish", finishEndsWork);
}
