// Every error leasehold throws, one module per family; this barrel keeps `./errors.js` the one import.
export { LeaseholdError } from "./errors/base.js";
export { ClientAbortedError, ShutdownError } from "./errors/interruptions.js";
export { type LeaseLostError, LockLeaseLostError, SemaphoreLeaseLostError } from "./errors/lease-lost.js";
export { LockNotAcquiredError, type NotAcquiredReason, SemaphoreNotAcquiredError } from "./errors/refusals.js";
export { StorePermissionError, StoreUnavailableError } from "./errors/store.js";
export { ValidationError } from "./errors/validation.js";
