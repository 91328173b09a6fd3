import { subscribe } from "node:diagnostics_channel";
import type { FastifyReply } from "fastify";
import { handlerFailed } from "../http/node-response.js";

/** What Fastify publishes on its handler tracing channel when a handler fails. */
interface HandlerFailure {
  reply?: FastifyReply;
  error?: unknown;
}

/** Fastify's tracing channel of route handlers (`fastify.request.handler`), its `error` event. */
const HANDLER_ERROR = "tracing:fastify.request.handler:error";

let listening = false;

function failed(message: unknown): void {
  const { reply, error } = message as HandlerFailure;
  // Only a hijacked reply still open: every other failure reaches `reply.send(error)`, heard there.
  if (reply === undefined || !reply.sent || reply.raw.writableEnded) return;
  handlerFailed(reply.raw, error);
}

/**
 * A handler that hijacked its reply (`reply.hijack()`) and then failed: Fastify only logs the
 * failure ("Promise errored, but reply.sent = true was set") and leaves the raw response as it is,
 * so nothing in the request shows that the handler's work is over. Its handler tracing channel
 * does: heard there, the permit returns at once (nothing reported lost), and leasehold's own abort
 * reasons get their documented answer (503 before the response started, the response cut after).
 * Subscribed once per process, when the first hook is made; with a subscriber Fastify builds one
 * small tracing record per request.
 */
export function hearHijackedFailures(): void {
  if (listening) return;
  listening = true;
  subscribe(HANDLER_ERROR, failed);
}
