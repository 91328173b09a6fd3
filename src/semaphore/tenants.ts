import { ValidationError } from "../errors/index.js";
import type { Tenant } from "../lease/call.js";
import type { TenantCallOptions } from "../options/types.js";
import { tenant as checkTenant, integerAtLeast } from "../options/validate.js";

/** The tenant defaults of a semaphore, checked once. */
export interface TenantDefaults {
  limit: number | ((tenant: string) => number) | undefined;
  maxQueue: number;
}

const limitFix = "Pass the most permits one tenant may hold at once, e.g. tenantLimit: 5.";

export function tenantDefaults(options: Record<string, unknown>, limit: number | undefined): TenantDefaults {
  const given = options.tenantLimit;
  if (given !== undefined && typeof given !== "function") {
    const checked = integerAtLeast("tenantLimit", given, 1, limitFix);
    if (limit !== undefined && checked > limit) throw above(checked, limit);
  }
  return {
    limit: given as TenantDefaults["limit"],
    maxQueue: options.tenantMaxQueue === undefined ? 0 : maxQueueOf(options.tenantMaxQueue),
  };
}

/**
 * The tenant of one call and its share, checked before any slot is taken:
 * a tenant needs a `tenantLimit` (the call's or the semaphore's), a
 * `tenantLimit` needs a tenant, and the cap fits within the id's limit and
 * holds the call's weight.
 */
export function tenantOfCall(
  defaults: TenantDefaults,
  given: TenantCallOptions,
  limit: number,
  weight: number,
): Tenant | undefined {
  if (given.tenant === undefined) {
    if (given.tenantLimit !== undefined || given.tenantMaxQueue !== undefined) {
      const option = given.tenantLimit !== undefined ? "tenantLimit" : "tenantMaxQueue";
      throw new ValidationError(
        "tenant",
        `\`${option}\` was given without a \`tenant\`: pass the tenant the call is for (e.g. tenant: "acme"), or drop ${option}.`,
      );
    }
    return undefined;
  }
  const name = checkTenant(given.tenant);
  const cap = given.tenantLimit !== undefined ? given.tenantLimit : capOf(defaults.limit, name);
  if (cap === undefined) {
    throw new ValidationError(
      "tenantLimit",
      `tenant "${name}" has no tenantLimit: pass tenantLimit with the call or to semaphore(...). ${limitFix}`,
    );
  }
  const tenantLimit = integerAtLeast("tenantLimit", cap, 1, limitFix);
  if (tenantLimit > limit) throw above(tenantLimit, limit);
  if (weight > tenantLimit) {
    throw new ValidationError(
      "weight",
      `\`weight\` ${weight} is above the tenantLimit ${tenantLimit} of tenant "${name}": such a call could never be admitted. Lower the weight or raise tenantLimit.`,
    );
  }
  const maxQueue = given.tenantMaxQueue === undefined ? defaults.maxQueue : maxQueueOf(given.tenantMaxQueue);
  return { name, limit: tenantLimit, maxQueue };
}

function capOf(limit: TenantDefaults["limit"], tenant: string): unknown {
  if (typeof limit !== "function") return limit;
  try {
    return limit(tenant);
  } catch (error) {
    throw new ValidationError(
      "tenantLimit",
      `the tenantLimit function threw for tenant "${tenant}": ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

function maxQueueOf(value: unknown): number {
  return integerAtLeast("tenantMaxQueue", value, 1, "Pass the most callers of one tenant that may wait on one id.");
}

function above(tenantLimit: number, limit: number): ValidationError {
  return new ValidationError(
    "tenantLimit",
    `\`tenantLimit\` ${tenantLimit} is above the id's limit ${limit}: one tenant cannot hold more than all of them. Lower tenantLimit to ${limit} or less.`,
  );
}
