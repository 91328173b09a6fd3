import {
  applyDecorators,
  createParamDecorator,
  type ExecutionContext,
  SetMetadata,
  UseGuards,
  UseInterceptors,
} from "@nestjs/common";
import type { ClientInput } from "../../src/store/access/types.js";
import { memoryStore } from "../../src/store/memory/index.js";
import { Admission } from "../http/admission.js";
import { parseAdmissionOptions } from "../http/config.js";
import type { RequestLease } from "../http/types.js";
import { LeaseholdGuard, LeaseholdInterceptor } from "./guard.js";
import { type NestLockOptions, type NestRequest, type NestSemaphoreOptions, ROUTE, type Route, whereOf } from "./options.js";
import { tracked, trackRoutes } from "./work.js";

/** Stands in for the module's client while a decorator's options are checked; never used for leases. */
const VALIDATION_STORE: ClientInput = memoryStore();

function guardWith(route: Route): ClassDecorator & MethodDecorator {
  // Validate now, when the class is defined, not on the first request (the module's client is not known yet).
  new Admission(parseAdmissionOptions(route, whereOf(route), { client: VALIDATION_STORE }));
  const decorate = applyDecorators(SetMetadata(ROUTE, route), UseGuards(LeaseholdGuard), UseInterceptors(LeaseholdInterceptor));
  // The handlers are wrapped first, so that this decorator's metadata (and any applied later) lands on the wrapper
  // Nest will call: the interceptor then sees the handler's own promise, not only its observable.
  return ((target: object, key?: string | symbol, descriptor?: TypedPropertyDescriptor<unknown>) => {
    if (descriptor === undefined) {
      trackRoutes(target as { prototype: object });
      decorate(target as never);
      return;
    }
    if (typeof descriptor.value === "function" && key !== undefined) {
      descriptor.value = tracked(target, key, descriptor.value as (...args: unknown[]) => unknown);
    }
    decorate(target, key as string | symbol, descriptor);
    return descriptor;
  }) as ClassDecorator & MethodDecorator;
}

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
 * import { Lease, type SemaphoreLease, Semaphore } from "leasehold/nestjs";
 *
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
 * import { Lease, Lock, type LockLease } from "leasehold/nestjs";
 *
 * @Post("orders/:id/pay")
 * @Lock("order", { key: (req) => String(req.params.id) })
 * pay(@Lease() lease: LockLease) { ... }
 * ```
 */
export function Lock(name: string, options: NestLockOptions = {}): ClassDecorator & MethodDecorator {
  return guardWith({ kind: "lock", name, options });
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
