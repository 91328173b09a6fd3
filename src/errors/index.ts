// Every error leasehold throws, one module per family; this barrel is the one import of them all.
export { LeaseholdError } from "./base.js";
export { ClientAbortedError, ShutdownError } from "./interruptions.js";
export { type LeaseLostError, LockLeaseLostError, SemaphoreLeaseLostError } from "./lease-lost.js";
export { LockNotAcquiredError, type NotAcquiredReason, SemaphoreNotAcquiredError } from "./refusals.js";
export { StorePermissionError, StoreUnavailableError } from "./store.js";
export { ValidationError } from "./validation.js";
