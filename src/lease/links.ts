/** A lease's links among its owner's leases: symbol keys, so that `JSON.stringify(lease)` meets no cycle. */
export const TRACKED: unique symbol = Symbol("leasehold.tracked");
export const BEFORE: unique symbol = Symbol("leasehold.before");
export const AFTER: unique symbol = Symbol("leasehold.after");
