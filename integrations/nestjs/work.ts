import { finished, Readable } from "node:stream";
import { Req } from "@nestjs/common";
import type { Exchange } from "../http/exchange.js";

/** Nest's metadata key of a route handler's path (`@Get()`, `@Post()` …): what marks a method as a route. */
const PATH_METADATA = "path";
/** Nest's metadata key of a handler's parameters (`ROUTE_ARGS_METADATA`), stable since Nest 5. */
const ROUTE_ARGS_METADATA = "__routeArguments__";
/** Marks a method wrapped by {@link tracked}, so that it is wrapped once and the interceptor knows it can rely on it. */
const TRACKED = Symbol("leasehold:tracked");
/** Where the interceptor leaves a request's {@link HandlerWork} for the handler's hidden parameter. */
const WORK = Symbol("leasehold:work");

/** The cause of a loss reported when the handler's end could not be seen (`observableEnded`). */
const UNSEEN =
  "leasehold/nestjs: the handler's observable ended before Nest called the handler (an interceptor outside LeaseholdInterceptor, such as timeout(), gave up while a pipe still ran), and no call of the handler was seen to end";

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
  #called = false;
  /** The observable ended before the handler was called or answered: a later call takes over its share. */
  #orphaned = false;

  constructor(readonly exchange: Exchange) {}

  /** The handler was called and returned `result`: a promise keeps the work running until it settles. */
  started(result: unknown): void {
    this.#called = true;
    const promised = typeof (result as PromiseLike<unknown> | null)?.then === "function";
    if (this.#orphaned) {
      // The observable's share was kept for this call: it ends with the call.
      this.#orphaned = false;
      if (!promised) {
        this.ended();
        return;
      }
    } else if (promised) {
      this.#pending++;
    } else {
      return;
    }
    (result as PromiseLike<unknown>).then(
      () => this.ended(),
      () => this.ended(),
    );
  }

  /**
   * The handler's observable ended; `answered` when it had emitted, completed or failed first (the
   * handler had returned, and its promise settled). Ended without either, and before the wrapper saw
   * the handler called (an outer `timeout()` gave up while a pipe or a guard after ours still ran, or
   * the handler is not one the decorators wrapped), the handler may still run: its end cannot be
   * seen, so the permit is held as for a departure (`disconnectGraceMs`, then reported lost), or until
   * a late call to the wrapped handler is seen to end.
   */
  observableEnded(answered: boolean): void {
    if (answered || this.#called) {
      this.ended();
      return;
    }
    this.#orphaned = true;
    this.exchange.workUnseen(new Error(UNSEEN));
  }

  /**
   * The handler's observable emitted `value`. A `StreamableFile` is work too: its stream's producer (an
   * async generator, a file read) runs while Nest pipes it, after the handler returned; the work runs
   * until that stream ends, fails or is destroyed (Nest destroys it when the client leaves: its
   * producer's current step and `finally` come first). Without this the permit went back at a
   * departure while the producer still worked.
   */
  emitted(value: unknown): void {
    const getStream = (value as { getStream?: unknown } | null)?.getStream;
    if (typeof getStream !== "function") return;
    const stream: unknown = getStream.call(value);
    if (!(stream instanceof Readable) || stream.readableEnded || stream.destroyed) return;
    this.#pending++;
    finished(stream, () => this.ended());
  }

  /** The observable, or the handler's promise, ended. */
  ended(): void {
    if (--this.#pending === 0) this.exchange.workEnded();
  }
}

/**
 * Hands the handler call of a request its {@link HandlerWork}: `request` is the one whose handler is
 * being called, so the work is found without an `AsyncLocalStorage` (whose first `run` turns on
 * promise hooks for the whole process, on Node 20: every promise of the application then costs
 * two to four times as much).
 */
export function within(request: Record<symbol, unknown>, work: HandlerWork): void {
  request[WORK] = work;
}

/**
 * The hidden parameter is the request itself (`@Req()`): Nest runs no pipe on it, where it runs every
 * global pipe on a custom parameter (a pipe that rebuilds objects handed the handler a copy of the
 * work, and its promise went untracked: test/http/nestjs/handler-work-pipes.test.ts). The work stays on
 * the request: a handler called again for it (a `retry()` interceptor) is tracked again.
 */
function workOf(request: unknown): HandlerWork | undefined {
  if (request === null || typeof request !== "object") return undefined;
  const work = (request as Record<symbol, unknown>)[WORK];
  return work instanceof HandlerWork ? work : undefined;
}

/** True when `handler` is a wrapper made by {@link tracked}: an inherited one serves the subclass as it is. */
function isTracked(handler: unknown): boolean {
  return typeof handler === "function" && (handler as Method)[TRACKED] === true;
}

/** The index of a parameter after every one `method` declares or Nest fills, on `prototype[key]`. */
function hiddenIndex(prototype: object, key: string | symbol, method: Method): number {
  let index = method.length;
  const types: unknown = Reflect.getMetadata("design:paramtypes", prototype, key);
  if (Array.isArray(types)) index = Math.max(index, types.length);
  const params: Record<string, { index?: unknown }> | undefined = Reflect.getMetadata(
    ROUTE_ARGS_METADATA,
    prototype.constructor,
    key,
  );
  for (const param of Object.values(params ?? {})) {
    if (typeof param.index === "number") index = Math.max(index, param.index + 1);
  }
  return index;
}

/**
 * Wraps the route handler `prototype[key]` so that, called by Nest for a request whose interceptor
 * is waiting for it, it hands its result to that request's {@link HandlerWork}: the wrapper declares
 * one more parameter, after the handler's own, which Nest fills with the request carrying it (and which the handler does
 * not see). Called any other way (directly, by another handler) it is the handler. Metadata other
 * decorators put on the method is carried over.
 */
export function tracked(prototype: object, key: string | symbol, method: Method): Method {
  if (method[TRACKED] === true) return method;
  const index = hiddenIndex(prototype, key, method);
  const wrapped: Method = function (this: unknown, ...args: unknown[]): unknown {
    const work = workOf(args[index]);
    if (work === undefined) return method.apply(this, args);
    args.length = index;
    const result = method.apply(this, args);
    work.started(result);
    return result;
  };
  for (const name of Reflect.getOwnMetadataKeys(method)) {
    Reflect.defineMetadata(name, Reflect.getOwnMetadata(name, method), wrapped);
  }
  Object.defineProperty(wrapped, "name", { value: method.name });
  wrapped[TRACKED] = true;
  Req()(prototype, key, index);
  return wrapped;
}

/**
 * Wraps every route handler the controller `target` serves: those it declares and those it inherits,
 * nearest first, as Nest finds them (it serves every route method along the prototype chain, with the
 * class's guards and interceptors). An inherited handler is wrapped on `target`'s own prototype, over
 * the method it inherits, so the base class and its other subclasses keep theirs. Idempotent.
 */
export function trackRoutes(target: { prototype: object }): void {
  const prototype = target.prototype;
  const seen = new Set<string>();
  for (let owner: object | null = prototype; owner !== null && owner !== Object.prototype; owner = Object.getPrototypeOf(owner)) {
    for (const name of Object.getOwnPropertyNames(owner)) {
      if (name === "constructor" || seen.has(name)) continue;
      seen.add(name);
      const descriptor = Object.getOwnPropertyDescriptor(owner, name);
      const value: unknown = descriptor?.value;
      if (typeof value !== "function" || !Reflect.hasOwnMetadata(PATH_METADATA, value) || isTracked(value)) continue;
      const wrapped = tracked(prototype, name, value as Method);
      Object.defineProperty(prototype, name, { ...descriptor, value: wrapped });
    }
  }
}
