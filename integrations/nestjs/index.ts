/**
 * NestJS (Express and Fastify platforms): `@Semaphore` and `@Lock` on handlers
 * or controllers, `@Lease()` for the handler, configured by `LeaseholdModule`.
 *
 * @module leasehold/nestjs
 */

export type { LockLease, SemaphoreLease } from "../../src/lease/types.js";
export { PROBLEM_TYPES } from "../http/problem.js";
export type {
  ProblemDetails,
  ProblemType,
  Rejection,
  RejectionContext,
  RejectionReason,
  RequestLease,
  SharedAdmissionOptions,
} from "../http/types.js";
export { Lease, Lock, Semaphore } from "./decorators.js";
export { LeaseholdGuard, LeaseholdInterceptor, LeaseRejectedException } from "./guard.js";
export { LeaseholdModule, type LeaseholdModuleAsyncOptions, type LeaseholdOptionsFactory } from "./module.js";
export {
  LEASEHOLD_OPTIONS,
  type LeaseholdModuleOptions,
  type NestLockOptions,
  type NestOnRejected,
  type NestRequest,
  type NestSemaphoreOptions,
} from "./options.js";
