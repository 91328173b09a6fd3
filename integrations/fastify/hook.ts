import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler } from "fastify";
import type { LeaseLostError } from "../../src/errors/index.js";
import type { CloseOptions } from "../../src/options/types.js";
import { Admission } from "../http/admission.js";
import { parseAdmissionOptions } from "../http/config.js";
import { type Admitted, Exchange, FENCE_HEADER, LeaseView } from "../http/exchange.js";
import { handlerFailed, reportHandlerEnd, sendRejection, watchNodeResponse } from "../http/node-response.js";
import { abortReasonOf, leaseLostRejection } from "../http/problem.js";
import type { AdmissionOptions, AdmissionRoute, Rejection } from "../http/types.js";
import { hearHijackedFailures } from "./hijacked.js";
import type { FastifyOnRejected, LeaseholdHook } from "./types.js";

/** What a route's hook reads per request. */
interface Route {
  readonly onRejected: FastifyOnRejected | undefined;
  readonly exposeFence: boolean;
}

/** One request through a leasehold hook: its callbacks are shared functions reading it, not closures. */
class FastifyExchange extends Exchange {
  constructor(
    name: string,
    graceMs: number,
    readonly request: FastifyRequest,
    readonly reply: FastifyReply,
    readonly done: HookHandlerDoneFunction,
    readonly route: Route,
  ) {
    super(name, graceMs);
    this.admitted = admitted as Exchange["admitted"];
    this.admitFailed = admitFailed as Exchange["admitFailed"];
  }
}

/** A refusal (or a lost lease's answer) through Fastify's reply, so its `onSend` and `onResponse` hooks see it. */
function sendThrough(reply: FastifyReply, rejection: Rejection): void {
  reply.code(rejection.status).headers(rejection.headers).send(JSON.stringify(rejection.problem));
}

function admitFailed(this: FastifyExchange, error: unknown): void {
  this.done(error instanceof Error ? error : new Error(String(error)));
}

function admitted(this: FastifyExchange, outcome: Admitted): void {
  const { request, reply, route } = this;
  try {
    if (outcome instanceof LeaseView) {
      request.lease = outcome;
      // On the raw response: a hijacked reply writes its own headers, and Fastify merges these into its own.
      if (route.exposeFence) reply.raw.setHeader(FENCE_HEADER, String(outcome.fence));
    } else if (outcome === "abandoned") return;
    else if (outcome !== "passed") {
      if (route.onRejected !== undefined) route.onRejected(request, reply, outcome);
      else sendThrough(reply, outcome);
      return;
    }
  } catch (error) {
    // A throwing `onRejected` (or header write) is the route's error, not a lost request.
    this.done(error instanceof Error ? error : new Error(String(error)));
    return;
  }
  this.done();
}

/**
 * A lease lost before the response started is answered 503 (through the reply, or on the raw
 * response of a hijacked one); during a body, the response is cut, so the client sees a cut stream
 * rather than a complete-looking one. Once the client has left there is nobody to answer.
 */
function answerLoss(this: FastifyExchange, error: LeaseLostError): void {
  const { reply } = this;
  const raw = reply.raw;
  if (this.gone) return;
  if (raw.headersSent || raw.writableEnded) {
    raw.destroy(error);
    return;
  }
  const answer = leaseLostRejection(error, this.id, this.limit);
  if (reply.sent) sendRejection(raw, answer);
  else sendThrough(reply, answer);
}

const SEND = Symbol("leasehold:send");

interface Hearing extends FastifyReply {
  [SEND]: FastifyReply["send"] | undefined;
}

/**
 * The reply's `send`, as leasehold's hook installs it on each guarded request's reply: every
 * failure Fastify answers comes through `reply.send(error)` (a handler's throw or rejection, a
 * later hook's error, a failed validation). The request is over then: its permit returns at once,
 * and the connection Fastify may then cut (a response already started) is not a client leaving,
 * so nothing is reported lost. leasehold's own abort reasons (a `ShutdownError`, a LeaseLost error,
 * a `ClientAbortedError`, or an `AbortError` made from `lease.signal` with one as its cause) are
 * answered here as documented, 503 `shutting-down` or `lease-lost`, nothing for a client that left,
 * and the reply is hijacked so that Fastify's error handler neither answers (500) nor logs them.
 * Every other error goes on to Fastify's error handling unchanged.
 */
function hearingSend(this: Hearing, payload?: unknown): FastifyReply {
  if (payload instanceof Error && !this.sent) {
    if (abortReasonOf(payload) !== undefined) {
      this.hijack();
      handlerFailed(this.raw, payload);
      return this;
    }
    handlerFailed(this.raw, payload);
  }
  return (this[SEND] as FastifyReply["send"]).call(this, payload);
}

/** Installs {@link hearingSend} on `reply`, once (leasehold hooks may be stacked on a route). */
function hearFailures(reply: FastifyReply): void {
  const hearing = reply as Hearing;
  if (hearing.send === (hearingSend as FastifyReply["send"])) return;
  hearing[SEND] = hearing.send;
  hearing.send = hearingSend as FastifyReply["send"];
}

/** Makes a route's hook: options checked now, before any request; `defaults` are a registered plugin's. */
export function hook(
  route: AdmissionRoute<FastifyRequest, FastifyOnRejected>,
  where: string,
  defaults?: AdmissionOptions<FastifyRequest, FastifyOnRejected>,
): LeaseholdHook {
  const admission = new Admission(parseAdmissionOptions(route, where, defaults));
  const { config } = admission;
  const { name, disconnectGraceMs } = config;
  const settings: Route = { onRejected: config.onRejected, exposeFence: config.exposeFence };
  hearHijackedFailures();
  const handler = function leasehold(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    const exchange = new FastifyExchange(name, disconnectGraceMs, request, reply, done, settings);
    const raw = reply.raw;
    watchNodeResponse(raw, exchange);
    // After it: a loss is answered through the reply, so Fastify's hooks see the answer.
    exchange.onLost = answerLoss as Exchange["onLost"];
    // The handler's end is taken from the response's: `reply.send`, a hijacked `raw.end` and a
    // stream piped by `reply.send(stream)` all end it; a failure is heard through `reply.send(error)`.
    reportHandlerEnd(raw, exchange);
    hearFailures(reply);
    admission.admitTo(request, exchange);
  };
  return Object.assign(handler as onRequestHookHandler, { close: (options?: CloseOptions) => admission.close(options) });
}
