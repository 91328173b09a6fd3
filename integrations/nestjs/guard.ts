import type { ServerResponse } from "node:http";
import {
  type BeforeApplicationShutdown,
  type CallHandler,
  type CanActivate,
  type ExecutionContext,
  HttpException,
  Inject,
  Injectable,
  type NestInterceptor,
  Optional,
  ServiceUnavailableException,
} from "@nestjs/common";
import { HttpAdapterHost, ModulesContainer, Reflector } from "@nestjs/core";
import { catchError, finalize, type Observable, tap } from "rxjs";
import { withoutStack } from "../../src/errors/base.js";
import { CLOSE_GRACE_MS } from "../../src/options/defaults.js";
import { Admission } from "../http/admission.js";
import { given, parseAdmissionOptions } from "../http/config.js";
import { Exchange, FENCE_HEADER, LeaseView } from "../http/exchange.js";
import { watchNodeResponse } from "../http/node-response.js";
import { abortRejection } from "../http/problem.js";
import type { Rejection } from "../http/types.js";
import {
  ADMITTED,
  EXCHANGE,
  LEASEHOLD_OPTIONS,
  type LeaseholdModuleOptions,
  MODULE_DEFAULTS,
  type NestOnRejected,
  type NestRequest,
  ROUTE,
  type Route,
  whereOf,
} from "./options.js";
import { HandlerWork, trackRoutes, within } from "./work.js";

/** The status of a request whose client left first (nginx's): nobody reads it, access logs do. */
const CLIENT_CLOSED_REQUEST = 499;

/**
 * The rejection a guarded route throws: an `HttpException` whose response is
 * the problem+json body, so the app's exception filters apply. Retry-After
 * and Content-Type are already set on the response. Thrown for a refusal by
 * the guard, and by {@link LeaseholdInterceptor} for a handler that failed
 * with a `ShutdownError` or a lost lease (`rejection.reason` `shutting-down`
 * or `lease-lost`).
 *
 * @example
 * ```ts
 * @Catch(LeaseRejectedException)
 * class BusyFilter implements ExceptionFilter {
 *   catch(error: LeaseRejectedException, host: ArgumentsHost) { ... error.rejection.retryAfter ... }
 * }
 * ```
 */
export class LeaseRejectedException extends HttpException {
  readonly rejection: Rejection;

  constructor(rejection: Rejection) {
    super(rejection.problem, rejection.status, { cause: rejection.error, description: rejection.problem.title });
    this.rejection = rejection;
  }
}

/**
 * Guards a route with its `@Semaphore`/`@Lock`: runs before interceptors and
 * pipes, holds the lease until the response has finished and (with
 * {@link LeaseholdInterceptor}, which the decorators install with it) the
 * handler is done, and puts it on the request for `@Lease()`. Alone, it holds
 * the lease until the response finishes, or `disconnectGraceMs` after a
 * disconnect. Non-HTTP contexts (microservices, websockets) pass through
 * unguarded.
 *
 * It closes its routes' semaphores and locks when the application shuts down
 * (`app.close()`, or a signal with `app.enableShutdownHooks()`), before the
 * HTTP server closes: requests arriving from then on are answered 503
 * `shutting-down`, requests in flight see their lease's signal abort with a
 * `ShutdownError`, and their permits are released when they end, at the
 * latest after the module's `shutdownGraceMs`.
 *
 * @example
 * ```ts
 * // Installed by @Semaphore/@Lock; apply it yourself only to reuse a route's metadata:
 * @UseGuards(LeaseholdGuard)
 * ```
 */
@Injectable()
export class LeaseholdGuard implements CanActivate, BeforeApplicationShutdown {
  readonly #admissions = new WeakMap<Route, Admission<NestRequest, NestOnRejected>>();
  /** Every admission made, to close them with the app. */
  readonly #made: Admission<NestRequest, NestOnRejected>[] = [];
  #closing: Promise<void> | undefined;

  constructor(
    @Inject(Reflector) protected readonly reflector: Reflector,
    @Inject(HttpAdapterHost) protected readonly adapterHost: HttpAdapterHost,
    @Optional() @Inject(LEASEHOLD_OPTIONS) protected readonly moduleOptions: LeaseholdModuleOptions = {},
    @Optional() @Inject(ModulesContainer) modules?: ModulesContainer,
  ) {
    // Nest makes the guard when it creates the app, before it reads its routes (at `init`): the
    // handlers of controllers that inherit a decorated class are wrapped now, as the decorator could
    // not (the derived class did not exist yet when it ran), so that their promise is seen too.
    for (const module of modules?.values() ?? []) {
      for (const { metatype } of module.controllers.values()) {
        if (typeof metatype === "function" && Reflect.getMetadata(ROUTE, metatype) !== undefined) trackRoutes(metatype);
      }
    }
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== "http") return true;
    const route = this.reflector.getAllAndOverride<Route | undefined>(ROUTE, [context.getHandler(), context.getClass()]);
    if (route === undefined) return true;
    const http = context.switchToHttp();
    const request = http.getRequest();
    const response = http.getResponse();
    // A class and a method decorator both install this guard: admit once.
    if (request[ADMITTED] === true) return true;
    request[ADMITTED] = true;

    const admission = this.#admissionFor(route);
    const raw: ServerResponse = response.raw ?? response;
    const exchange = new Exchange(admission.config.name, admission.config.disconnectGraceMs);
    request[EXCHANGE] = exchange;
    watchNodeResponse(raw, exchange);

    const outcome = await admission.admit(request, exchange);
    const adapter = this.adapterHost.httpAdapter;
    if (outcome instanceof LeaseView) {
      request.lease = outcome;
      if (admission.config.exposeFence) adapter.setHeader(response, FENCE_HEADER, String(outcome.fence));
      return true;
    }
    if (outcome === "passed") return true;
    if (outcome === "abandoned") return false;
    for (const [name, value] of Object.entries(outcome.headers)) adapter.setHeader(response, name, value);
    throw admission.config.onRejected?.(outcome, request) ?? withoutStack(() => new LeaseRejectedException(outcome));
  }

  /**
   * Nest's shutdown hook, before the HTTP server closes (so requests that still
   * arrive are answered): closes every route's semaphore or lock, with the
   * module's `shutdownGraceMs`, and resolves once their permits are back.
   */
  beforeApplicationShutdown(): Promise<void> {
    this.#closing ??= Promise.all(
      this.#made.map((admission) => admission.close({ graceMs: this.moduleOptions.shutdownGraceMs ?? CLOSE_GRACE_MS })),
    ).then(() => {});
    return this.#closing;
  }

  /** One admission per decorated route and app: options merged over the module's defaults. */
  #admissionFor(route: Route): Admission<NestRequest, NestOnRejected> {
    let admission = this.#admissions.get(route);
    if (admission === undefined) {
      admission = new Admission(parseAdmissionOptions(route, whereOf(route), given(this.moduleOptions, MODULE_DEFAULTS)));
      this.#admissions.set(route, admission);
      this.#made.push(admission);
      // A route first requested while the app shuts down: refused like the others.
      if (this.#closing !== undefined) void admission.close({ graceMs: 0 });
    }
    return admission;
  }
}

/**
 * Tells the guard's exchange when the handler is done (its observable
 * completed, failed or was unsubscribed, and the promise the handler returned
 * settled), so the permit covers handlers that work on after the response,
 * after their client left, or after a `timeout()` interceptor gave up on them.
 * The handler's promise is seen for handlers the decorators wrapped. `@Semaphore` and
 * `@Lock` install it with the guard; a request without it is held until its
 * response finishes (or `disconnectGraceMs` after a disconnect). It also
 * gives leasehold's own abort reasons, when the handler lets them propagate,
 * their documented answer: a `ShutdownError` or a lost lease becomes a
 * {@link LeaseRejectedException} (503 `shutting-down` or `lease-lost`), a
 * `ClientAbortedError` an `HttpException` 499 nobody reads; Nest logs neither.
 *
 * @example
 * ```ts
 * // Installed by @Semaphore/@Lock; apply it yourself only next to the guard:
 * @UseGuards(LeaseholdGuard)
 * @UseInterceptors(LeaseholdInterceptor)
 * ```
 */
@Injectable()
export class LeaseholdInterceptor implements NestInterceptor {
  constructor(@Inject(HttpAdapterHost) protected readonly adapterHost: HttpAdapterHost) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const exchange: Exchange | undefined =
      context.getType() === "http" ? context.switchToHttp().getRequest()[EXCHANGE] : undefined;
    if (exchange === undefined) return next.handle();
    if (!exchange.workStarted()) {
      // A class and a method decorator both install it: the outermost reports.
      if (!exchange.workOver) return next.handle();
      // The work had ended and Nest calls this again: an interceptor outside ours (retry()) subscribed
      // again, and the handler is called again. That is work too; once the permit is back, it must not
      // run (test/http/nestjs/outer-retry.test.ts).
      if (!exchange.workResumed()) {
        throw new ServiceUnavailableException("leasehold: the handler was called again after its permit was given back");
      }
    }
    const answered = catchError((error: unknown) => {
      throw this.#answer(error, exchange, context);
    });
    // Its observable can end (an outer timeout(), an SSE disconnect) while the handler's promise still
    // runs (seen through the wrapper the decorators put on every route they cover), or the stream it
    // answered with is still read.
    const work = new HandlerWork(exchange);
    const request = context.switchToHttp().getRequest();
    within(request, work);
    // Without a permit (a skipped request, fail-open) there is nothing to hold for a handler unseen.
    let heard = request.lease === undefined;
    const hear = () => {
      heard = true;
    };
    return next.handle().pipe(
      tap({ next: hear, error: hear, complete: hear }),
      answered,
      tap((value) => work.emitted(value)),
      finalize(() => work.observableEnded(heard)),
    );
  }

  /**
   * What the handler failed with, as Nest's exception filters should see it. leasehold's own abort
   * reasons, which a handler that passes `lease.signal` to its work lets propagate, would otherwise be
   * answered 500 and logged as unknown errors: a `ShutdownError` or a lost lease becomes a
   * {@link LeaseRejectedException} with the documented problem (its headers set, as for a refusal),
   * a `ClientAbortedError` an `HttpException` 499 that nobody reads (Nest logs neither). Any other
   * error is the app's, unchanged.
   */
  #answer(error: unknown, exchange: Exchange, context: ExecutionContext): unknown {
    const rejection = abortRejection(error, exchange.id, exchange.limit);
    if (rejection === undefined) return error;
    if (rejection === null) {
      return withoutStack(() => new HttpException("Client Closed Request", CLIENT_CLOSED_REQUEST, { cause: error }));
    }
    const response = context.switchToHttp().getResponse();
    const adapter = this.adapterHost.httpAdapter;
    if (!adapter.isHeadersSent(response)) {
      for (const [name, value] of Object.entries(rejection.headers)) adapter.setHeader(response, name, value);
    }
    return withoutStack(() => new LeaseRejectedException(rejection));
  }
}
