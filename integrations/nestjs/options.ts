import { SHARED_DEFAULTS } from "../http/lists.js";
import type {
  AdmissionRoute,
  LockAdmissionOptions,
  Rejection,
  SemaphoreAdmissionOptions,
  SharedAdmissionOptions,
} from "../http/types.js";

/**
 * The request a `key`, `limit`, `weight` or `skip` function receives: the
 * platform's own (Express `Request` or `FastifyRequest`), so it is left open.
 *
 * @example
 * ```ts
 * const tenant = (req: NestRequest): string => req.user.tenantId;
 * ```
 */
// biome-ignore lint/suspicious/noExplicitAny: Express and Fastify requests differ; user code like `req.user.tenantId` must compile on both
export type NestRequest = any;

/**
 * Your own exception for a refusal, instead of `LeaseRejectedException`.
 *
 * @example
 * ```ts
 * const onRejected: NestOnRejected = (rejection) => new HttpException({ busy: rejection.problem.key }, 429);
 * ```
 */
export type NestOnRejected = (rejection: Rejection, request: NestRequest) => Error;

/**
 * Options of {@link Semaphore}.
 *
 * @example
 * ```ts
 * const options: NestSemaphoreOptions = { key: (req) => req.user.tenantId, waitMs: 2_000 };
 * ```
 */
export interface NestSemaphoreOptions extends SemaphoreAdmissionOptions<NestRequest, NestOnRejected> {}

/**
 * Options of {@link Lock}.
 *
 * @example
 * ```ts
 * const options: NestLockOptions = { key: (req) => String(req.params.id), ttlMs: 10_000 };
 * ```
 */
export interface NestLockOptions extends LockAdmissionOptions<NestRequest, NestOnRejected> {}

/**
 * Options of {@link LeaseholdModule.forRoot}: the client, and defaults for every decorated route.
 *
 * @example
 * ```ts
 * const options: LeaseholdModuleOptions = { client: redis, onStoreError: "fail-open", disconnectGraceMs: 2_000 };
 * ```
 */
export interface LeaseholdModuleOptions extends SharedAdmissionOptions<NestRequest> {}

/** The module options every route takes as defaults. */
export const MODULE_DEFAULTS = SHARED_DEFAULTS;

/**
 * Injection token of the module options.
 *
 * @example
 * ```ts
 * constructor(@Inject(LEASEHOLD_OPTIONS) private readonly leasehold: LeaseholdModuleOptions) {}
 * ```
 */
export const LEASEHOLD_OPTIONS = Symbol("leasehold:options");

/** What `@Semaphore`/`@Lock` record on a handler or controller. */
export type Route = AdmissionRoute<NestRequest, NestOnRejected>;

/** Metadata key of the route a decorator recorded. */
export const ROUTE = Symbol("leasehold:route");
/** Marks a request already admitted (a class and a method decorator both install the guard). */
export const ADMITTED = Symbol("leasehold:admitted");
/** The request's exchange, for the interceptor that reports when the handler is done. */
export const EXCHANGE = Symbol("leasehold:exchange");

/** Where a route's options come from, in validation messages. */
export function whereOf(route: Route): string {
  return `@${route.kind === "semaphore" ? "Semaphore" : "Lock"}`;
}
