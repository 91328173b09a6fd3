import { AsyncLocalStorage } from "node:async_hooks";
import type { Exchange } from "../../src/http/exchange.js";

/** Nest's metadata key of a route handler's path (`@Get()`, `@Post()` …): what marks a method as a route. */
const PATH_METADATA = "path";
/** Marks a method wrapped by {@link tracked}, so that it is wrapped once and the interceptor knows it can rely on it. */
const TRACKED = Symbol("leasehold:tracked");

type Method = ((...args: unknown[]) => unknown) & { [TRACKED]?: true };

/**
 * What the handler of one request still has running: its observable (as the
 * interceptor sees it) and, once the handler has been called, the promise it
 * returned. An interceptor outside ours (`timeout()`) or a disconnect can end
 * the observable while that promise still runs: the permit is held until
 * both have ended, so a handler that is still calling the resource keeps its
 * permit.
 */
export class HandlerWork {
  #pending = 1;

  constructor(
    readonly exchange: Exchange,
    readonly handler: unknown,
  ) {}

  /** The handler was called and returned `result`: a promise keeps the work running until it settles. */
  started(result: unknown): void {
    if (typeof (result as PromiseLike<unknown> | null)?.then !== "function") return;
    this.#pending++;
    (result as PromiseLike<unknown>).then(
      () => this.ended(),
      () => this.ended(),
    );
  }

  /** The observable, or the handler's promise, ended. */
  ended(): void {
    if (--this.#pending === 0) this.exchange.workEnded();
  }
}

/** The request whose handler is being called: Nest calls it inside the scope its interceptors' `handle()` was made in. */
const current = new AsyncLocalStorage<HandlerWork>();

/** Runs `fn` (which calls `next.handle()`) so that the handler it eventually calls reports to `work`. */
export function within<T>(work: HandlerWork, fn: () => T): T {
  return current.run(work, fn);
}

/** True when `handler` reports its promise (it was wrapped by a leasehold decorator). */
export function isTracked(handler: unknown): boolean {
  return typeof handler === "function" && (handler as Method)[TRACKED] === true;
}

/**
 * Wraps a handler so that, called for a request whose interceptor is
 * waiting for it, it hands its result to that request's {@link HandlerWork}.
 * Called for anything else (a direct call, another handler's request) it is
 * the handler. Metadata other decorators put on the method is carried over.
 */
export function tracked(method: Method): Method {
  if (method[TRACKED] === true) return method;
  const wrapped: Method = function (this: unknown, ...args: unknown[]): unknown {
    const work = current.getStore();
    if (work === undefined || work.handler !== wrapped) return method.apply(this, args);
    // The handler's own work does not run as "the handler being called": a call it makes to another route method is just a call.
    const result = current.exit(() => method.apply(this, args));
    work.started(result);
    return result;
  };
  for (const key of Reflect.getOwnMetadataKeys(method)) {
    Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, method), wrapped);
  }
  Object.defineProperty(wrapped, "name", { value: method.name });
  wrapped[TRACKED] = true;
  return wrapped;
}

/** A class decorator's share: wraps the route handlers the class itself declares. */
export function trackRoutes(target: { prototype: object }): void {
  const prototype = target.prototype;
  for (const name of Object.getOwnPropertyNames(prototype)) {
    if (name === "constructor") continue;
    const descriptor = Object.getOwnPropertyDescriptor(prototype, name);
    const value: unknown = descriptor?.value;
    if (typeof value !== "function" || !Reflect.hasOwnMetadata(PATH_METADATA, value)) continue;
    Object.defineProperty(prototype, name, { ...descriptor, value: tracked(value as Method) });
  }
}
