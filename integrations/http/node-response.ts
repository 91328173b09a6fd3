import type { ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import type { LeaseLostError } from "../../src/errors/index.js";
import type { Exchange } from "./exchange.js";
import { abortRejection, leaseLostRejection } from "./problem.js";
import type { Rejection } from "./types.js";

/** Writes a rejection as an `application/problem+json` response, with plain Node APIs (Express 4 and 5 alike). */
export function sendRejection(res: ServerResponse, rejection: Rejection): void {
  res.statusCode = rejection.status;
  for (const [name, value] of Object.entries(rejection.headers)) res.setHeader(name, value);
  res.end(JSON.stringify(rejection.problem));
}

const EXCHANGE = Symbol("leasehold:exchange");
const END = Symbol("leasehold:end");
const SOURCE = Symbol("leasehold:source");

/**
 * A response that reports to its exchange. The listeners below are shared
 * functions reading the exchange from the response, and `on`, not `once`,
 * attaches them: no closure or wrapper object per request, so nothing a
 * request allocates here can be tenured by V8 and keep the rest alive.
 */
interface Reporting extends ServerResponse {
  [EXCHANGE]: Exchange | undefined;
  [END]: ((...args: unknown[]) => ServerResponse) | undefined;
  /** The stream last piped into the response (`res.sendFile`, `stream.pipe(res)`), if any. */
  [SOURCE]: Readable | undefined;
}

// Every exchange on the response, innermost first: leasehold middlewares may be stacked on one route.
// Where the handler's end is taken from the response (`reportHandlerEnd`), the same two listeners
// report it too: one `finish` and one `close` listener per response, not two of each.
function finished(this: Reporting): void {
  for (let exchange: Exchange | undefined = this[EXCHANGE]; exchange !== undefined; exchange = exchange.outer) {
    exchange.responded();
  }
  if (endsWithResponse(this)) workEnded(this);
}

function closed(this: Reporting): void {
  const done = this.writableFinished;
  for (let exchange: Exchange | undefined = this[EXCHANGE]; exchange !== undefined; exchange = exchange.outer) {
    if (done) exchange.responded();
    else exchange.clientGone();
  }
  if (done || !endsWithResponse(this)) return;
  // After the exchanges have heard of the departure: a handler that already ended its response is
  // done; one that has not may still end it (told by its signal), and that call ends its work.
  if (this.writableEnded) workEnded(this);
  else {
    if (this[END] === undefined) {
      this[END] = this.end as Reporting[typeof END];
      this.end = reportingEnd as Reporting["end"];
    }
    // A middleware that captured the original `end` earlier (compression, express-session) calls it
    // past the wrapper; Node still emits 'prefinish' from it on a closed response.
    this.once("prefinish", prefinished);
  }
  pipeEndsWork(this);
}

function prefinished(this: Reporting): void {
  workEnded(this);
}

/** True when some exchange on `res` takes its handler's end from the response (see `reportHandlerEnd`). */
function endsWithResponse(res: Reporting): boolean {
  for (let exchange: Exchange | undefined = res[EXCHANGE]; exchange !== undefined; exchange = exchange.outer) {
    if (exchange.endsWithResponse) return true;
  }
  return false;
}

/** A lease lost before the response started is answered 503; during a body, the response is cut. */
function answerLoss(this: Exchange, error: LeaseLostError): void {
  const res = this.response;
  if (res === undefined || this.gone) return;
  if (res.headersSent || res.writableEnded) {
    res.destroy(error);
    return;
  }
  sendRejection(res, leaseLostRejection(error, this.id, this.limit));
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
export function watchNodeResponse(res: ServerResponse, exchange: Exchange): void {
  const reporting = res as Reporting;
  exchange.response = res;
  exchange.onLost = answerLoss;
  const outer = reporting[EXCHANGE];
  reporting[EXCHANGE] = exchange;
  if (outer !== undefined) {
    // Another leasehold middleware already listens to this response: its listeners serve both.
    exchange.outer = outer;
    if (res.destroyed) exchange.clientGone();
    return;
  }
  res.on("finish", finished);
  res.on("close", closed);
  // A client that left during an earlier step (an auth call, a body parser) emits nothing more:
  // without this the request would be admitted and its permit kept for a response nobody reads.
  if (res.destroyed) closed.call(reporting);
}

function workEnded(res: Reporting): void {
  for (let exchange: Exchange | undefined = res[EXCHANGE]; exchange !== undefined; exchange = exchange.outer) {
    exchange.workEnded();
  }
}

function reportingEnd(this: Reporting, ...args: unknown[]): ServerResponse {
  workEnded(this);
  return (this[END] as (...args: unknown[]) => ServerResponse).apply(this, args);
}

function piped(this: Reporting, source: Readable): void {
  this[SOURCE] = source;
}

/**
 * The client left a response that a stream was being piped into: the work
 * was that stream, and it ends when the stream is closed (`res.sendFile`
 * destroys its file stream then). Without this, a download cut short held
 * its permit for the grace and was reported as a lost lease. A source that
 * is only unpiped, not closed, leaves the grace to decide.
 */
function pipeEndsWork(res: Reporting): void {
  const source = res[SOURCE];
  if (source === undefined || res.writableFinished) return;
  if (source.destroyed) workEnded(res);
  else source.once("close", () => workEnded(res));
}

/**
 * For frameworks that do not expose the handler's promise (Express): the
 * handler's work is taken to have ended when it ends the response (`send`,
 * `json`, `sendFile` and pipes all call `end`): `end` is wrapped on this
 * response object when the middleware runs, and `finish` counts too. The
 * wrap must be in place before the handler runs, not only once the client
 * left: a middleware mounted earlier that replaced `end` and
 * streams the body itself (compression) may never call the original once
 * its client stopped reading, so only the handler's own call says it is
 * done. A stream piped into the response that closes after the client
 * left ends the work as well. `finish` and `close` are heard by
 * {@link watchNodeResponse}'s listeners: call this after it, before any await.
 */
export function reportHandlerEnd(res: ServerResponse, exchange: Exchange): void {
  const reporting = res as Reporting;
  exchange.workStarted();
  // A stacked middleware's exchange is reached through the chain: one wrap and one pipe listener per response.
  const listening = endsWithResponse(reporting);
  exchange.endsWithResponse = true;
  if (listening) return;
  res.on("pipe", piped);
  if (reporting[END] === undefined) {
    reporting[END] = res.end as Reporting[typeof END];
    res.end = reportingEnd as ServerResponse["end"];
  }
}

/**
 * The handler of `res` failed with `error` (Express: `next(error)`, or its promise rejected): every
 * exchange on the response ends now ({@link Exchange.failed}), so its permit returns at once and no
 * loss is reported when the framework then cuts the connection. True when `error` is one of
 * leasehold's own abort reasons, dealt with here so that the framework neither answers nor logs it:
 * answered with its problem response (503 `shutting-down` or `lease-lost`) if the response has not
 * started, cut if it has (a partial body must not look complete), left alone once answered (a lease
 * lost before the response started was answered at the loss) or for a client that left. False for a
 * response no leasehold middleware admitted, and for every other error: the framework's.
 */
export function handlerFailed(res: ServerResponse, error: unknown): boolean {
  const innermost = (res as Reporting)[EXCHANGE];
  if (innermost === undefined) return false;
  for (let exchange: Exchange | undefined = innermost; exchange !== undefined; exchange = exchange.outer) {
    exchange.failed(error);
  }
  const answer = abortRejection(error, innermost.id, innermost.limit);
  if (answer === undefined) return false;
  if (res.writableEnded || res.destroyed) return true;
  if (answer === null || res.headersSent) res.destroy();
  else sendRejection(res, answer);
  return true;
}
