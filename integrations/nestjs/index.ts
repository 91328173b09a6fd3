import type { ServerResponse } from "node:http";
import {
  applyDecorators,
  type CallHandler,
  type CanActivate,
  createParamDecorator,
  type DynamicModule,
  type ExecutionContext,
  Global,
  HttpException,
  Inject,
  Injectable,
  Module,
  type NestInterceptor,
  Optional,
  SetMetadata,
  UseGuards,
  UseInterceptors,
} from "@nestjs/common";
import { HttpAdapterHost, Reflector } from "@nestjs/core";
import { finalize, type Observable } from "rxjs";
import type { ClientInput } from "../../src/client.js";
import {
  Admission,
  type AdmissionOptions,
  type LockAdmissionOptions,
  type SemaphoreAdmissionOptions,
} from "../../src/http/admission.js";
import { Exchange, type RequestLease } from "../../src/http/exchange.js";
import { watchNodeResponse } from "../../src/http/node-response.js";
import { type Rejection, withoutStackTrace } from "../../src/http/problem.js";
import type { LockLease, SemaphoreLease } from "../../src/lease.js";
import { memoryStore } from "../../src/store/memory.js";
import { prefix as checkPrefix } from "../../src/validate.js";

/**
 * The request a `key`, `limit`, `weight` or `skip` function receives: the
 * platform's own (Express `Request` or `FastifyRequest`), so it is left open.
 */
// biome-ignore lint/suspicious/noExplicitAny: Express and Fastify requests differ; user code like `req.user.tenantId` must compile on both
export type NestRequest = any;

/** Your own exception for a refusal, instead of `LeaseRejectedException`. */
export type NestOnRejected = (rejection: Rejection, request: NestRequest) => Error;

/** Options of {@link Semaphore}. */
export interface NestSemaphoreOptions extends SemaphoreAdmissionOptions<NestRequest> {
  onRejected?: NestOnRejected;
}

/** Options of {@link Lock}. */
export interface NestLockOptions extends LockAdmissionOptions<NestRequest> {
  onRejected?: NestOnRejected;
}

/** Options of {@link LeaseholdModule.forRoot}: the client, and defaults for every decorated route. */
export interface LeaseholdModuleOptions
  extends Pick<
    AdmissionOptions<NestRequest>,
    "prefix" | "onStoreError" | "onStoreUnavailable" | "onLeaseLost" | "onRenewError" | "disconnectGraceMs"
  > {
  /** Where leases live. @default the process-wide embedded memory store */
  client?: ClientInput;
}

/** Options of {@link LeaseholdModule.forRootAsync}. */
export interface LeaseholdModuleAsyncOptions {
  imports?: DynamicModule["imports"];
  inject?: (string | symbol | (abstract new (...args: never[]) => unknown) | (new (...args: never[]) => unknown))[];
  useFactory: (...args: never[]) => LeaseholdModuleOptions | Promise<LeaseholdModuleOptions>;
}

/**
 * Injection token of the module options.
 *
 * @example
 * ```ts
 * constructor(@Inject(LEASEHOLD_OPTIONS) private readonly leasehold: LeaseholdModuleOptions) {}
 * ```
 */
export const LEASEHOLD_OPTIONS = Symbol("leasehold:options");
const ROUTE = Symbol("leasehold:route");
const ADMITTED = Symbol("leasehold:admitted");
/** The request's exchange, for the interceptor that reports when the handler is done. */
const EXCHANGE = Symbol("leasehold:exchange");

interface Route {
  kind: "semaphore" | "lock";
  name: string;
  limit: number | ((request: NestRequest) => number) | undefined;
  options: NestSemaphoreOptions | NestLockOptions;
}

/**
 * The rejection a guarded route throws: an `HttpException` whose response is
 * the problem+json body, so the app's exception filters apply. Retry-After
 * and Content-Type are already set on the response.
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

const MODULE_DEFAULTS = [
  "client",
  "prefix",
  "onStoreError",
  "onStoreUnavailable",
  "onLeaseLost",
  "onRenewError",
  "disconnectGraceMs",
] as const;

/**
 * Guards a route with its `@Semaphore`/`@Lock`: runs before interceptors and
 * pipes, holds the lease until the response has finished and (with
 * {@link LeaseholdInterceptor}, which the decorators install with it) the
 * handler is done, and puts it on the request for `@Lease()`. Alone, it holds
 * the lease until the response finishes, or `disconnectGraceMs` after a
 * disconnect. Non-HTTP contexts (microservices, websockets) pass through
 * unguarded. Subclass it to change `admissionFor`.
 *
 * @example
 * ```ts
 * // Installed by @Semaphore/@Lock; apply it yourself only to reuse a route's metadata:
 * @UseGuards(LeaseholdGuard)
 * ```
 */
@Injectable()
export class LeaseholdGuard implements CanActivate {
  readonly #admissions = new WeakMap<Route, Admission<NestRequest>>();

  constructor(
    @Inject(Reflector) protected readonly reflector: Reflector,
    @Inject(HttpAdapterHost) protected readonly adapterHost: HttpAdapterHost,
    @Optional() @Inject(LEASEHOLD_OPTIONS) protected readonly moduleOptions: LeaseholdModuleOptions = {},
  ) {}

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

    const admission = this.admissionFor(route);
    const raw: ServerResponse = response.raw ?? response;
    const exchange = new Exchange(admission.disconnectGraceMs);
    request[EXCHANGE] = exchange;
    let current = { key: admission.name, limit: 1 };
    watchNodeResponse(raw, exchange, admission, () => current);

    const outcome = await admission.admit(request, exchange);
    switch (outcome.type) {
      case "admitted":
        current = { key: outcome.lease.key, limit: "limit" in outcome.lease ? outcome.lease.limit : 1 };
        request.lease = outcome.lease;
        return true;
      case "passed":
        return true;
      case "abandoned":
        return false;
      case "rejected": {
        const { rejection } = outcome;
        const adapter = this.adapterHost.httpAdapter;
        for (const [name, value] of Object.entries(rejection.headers)) adapter.setHeader(response, name, value);
        throw route.options.onRejected?.(rejection, request) ?? withoutStackTrace(() => new LeaseRejectedException(rejection));
      }
    }
  }

  /** One admission per decorated route and app: options merged over the module's defaults. */
  protected admissionFor(route: Route): Admission<NestRequest> {
    let admission = this.#admissions.get(route);
    if (admission === undefined) {
      const defaults = Object.fromEntries(
        MODULE_DEFAULTS.map((name) => [name, this.moduleOptions[name]]).filter(([, value]) => value !== undefined),
      );
      const { onRejected: _, ...options } = route.options;
      admission = new Admission<NestRequest>(
        route.kind,
        route.name,
        route.limit,
        { ...defaults, ...options },
        `@${route.kind === "semaphore" ? "Semaphore" : "Lock"}`,
      );
      this.#admissions.set(route, admission);
    }
    return admission;
  }
}

/**
 * Tells the guard's exchange when the handler is done (its observable
 * completed, failed or was unsubscribed), so the permit covers handlers that
 * work on after the response, or after their client left. `@Semaphore` and
 * `@Lock` install it with the guard; a request without it is held until its
 * response finishes (or `disconnectGraceMs` after a disconnect).
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
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const exchange: Exchange | undefined =
      context.getType() === "http" ? context.switchToHttp().getRequest()[EXCHANGE] : undefined;
    // A class and a method decorator both install it: the outermost reports.
    if (exchange === undefined || !exchange.workStarted()) return next.handle();
    return next.handle().pipe(finalize(() => exchange.workEnded()));
  }
}

function guardWith(route: Route): ClassDecorator & MethodDecorator {
  // Validate now, when the class is defined, not on the first request.
  const { onRejected, ...options } = route.options;
  if (onRejected !== undefined && typeof onRejected !== "function") {
    throw new TypeError("leasehold: `onRejected` must be a function (rejection, request) returning an exception.");
  }
  new Admission(
    route.kind,
    route.name,
    route.limit,
    { ...options, client: options.client ?? VALIDATION_STORE },
    `@${route.kind === "semaphore" ? "Semaphore" : "Lock"}`,
  );
  return applyDecorators(
    SetMetadata(ROUTE, route),
    UseGuards(LeaseholdGuard),
    UseInterceptors(LeaseholdInterceptor),
  ) as ClassDecorator & MethodDecorator;
}

/** Stands in for the module's client while a decorator's options are checked; never used for leases. */
const VALIDATION_STORE: ClientInput = memoryStore();

/**
 * Admits a request to the decorated handler (or every handler of the
 * decorated controller) only while it holds one of `limit` permits of
 * `name`, or of `<name>:<key(request)>`. A full semaphore throws
 * `LeaseRejectedException` (503, Retry-After, problem+json). A method's
 * decorator overrides its controller's. The permit is held until the
 * response has finished and the handler is done; after a disconnect, until
 * the handler is done, at the latest `disconnectGraceMs`.
 *
 * @example
 * ```ts
 * @Post("chat")
 * @Semaphore("openai", 20, { key: (req) => req.user.tenantId })
 * chat(@Lease() lease: SemaphoreLease) { return callModel({ signal: lease.signal }); }
 * ```
 */
export function Semaphore(
  name: string,
  limit: number | ((request: NestRequest) => number),
  options: NestSemaphoreOptions = {},
): ClassDecorator & MethodDecorator {
  return guardWith({ kind: "semaphore", name, limit, options });
}

/**
 * Admits one request at a time per `name` (or per `<name>:<key(request)>`)
 * to the decorated handler or controller; a held lock throws a 409
 * `LeaseRejectedException`.
 *
 * @example
 * ```ts
 * @Post("orders/:id/pay")
 * @Lock("order", { key: (req) => req.params.id })
 * pay(@Lease() lease: LockLease) { ... }
 * ```
 */
export function Lock(name: string, options: NestLockOptions = {}): ClassDecorator & MethodDecorator {
  return guardWith({ kind: "lock", name, limit: undefined, options });
}

/**
 * Injects the request's lease into a handler parameter. Its `signal` aborts
 * when the lease is lost or the client disconnects. `undefined` when the
 * route was skipped or let through by `onStoreError: "fail-open"`.
 *
 * @example
 * ```ts
 * @Get("report") @Semaphore("reports", 4)
 * report(@Lease() lease: SemaphoreLease) { return build({ signal: lease.signal }); }
 * ```
 */
export const Lease: () => ParameterDecorator = createParamDecorator(
  (_data: unknown, context: ExecutionContext): RequestLease | undefined => context.switchToHttp().getRequest().lease,
);

/** The module's prefix is every route's default: a bad one is refused when the module is configured, not on the first request. */
function checkModulePrefix(options: LeaseholdModuleOptions): LeaseholdModuleOptions {
  if (options?.prefix !== undefined) checkPrefix(options.prefix);
  return options;
}

/**
 * Configures the client and defaults of every `@Semaphore` and `@Lock` in
 * the app. Global: import it once, in the root module.
 *
 * @example
 * ```ts
 * @Module({ imports: [LeaseholdModule.forRoot({ client: new Redis(process.env.REDIS_URL) })] })
 * export class AppModule {}
 * ```
 */
@Global()
@Module({})
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class by contract
export class LeaseholdModule {
  static forRoot(options: LeaseholdModuleOptions = {}): DynamicModule {
    return {
      module: LeaseholdModule,
      providers: [{ provide: LEASEHOLD_OPTIONS, useValue: checkModulePrefix(options) }, LeaseholdGuard],
      exports: [LEASEHOLD_OPTIONS, LeaseholdGuard],
    };
  }

  /**
   * Like `forRoot`, with options from a factory (e.g. a Redis client from a config service).
   *
   * @example
   * ```ts
   * LeaseholdModule.forRootAsync({ inject: [ConfigService], useFactory: (config: ConfigService) => ({ client: new Redis(config.get("REDIS_URL")) }) })
   * ```
   */
  static forRootAsync(options: LeaseholdModuleAsyncOptions): DynamicModule {
    return {
      module: LeaseholdModule,
      imports: options.imports ?? [],
      providers: [
        {
          provide: LEASEHOLD_OPTIONS,
          useFactory: async (...args: unknown[]) =>
            checkModulePrefix(await (options.useFactory as (...args: unknown[]) => LeaseholdModuleOptions)(...args)),
          inject: options.inject ?? [],
        },
        LeaseholdGuard,
      ],
      exports: [LEASEHOLD_OPTIONS, LeaseholdGuard],
    };
  }
}

export { PROBLEM_TYPES, type ProblemDetails, type RejectionReason } from "../../src/http/problem.js";
export type { LockLease, Rejection, RequestLease, SemaphoreLease };
