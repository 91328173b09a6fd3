import { ValidationError } from "../errors/index.js";
import type { Tenant } from "../lease/call.js";
import type { TenantCallOptions } from "../options/types.js";
import { tenant as checkTenant, integerAtLeast, show } from "../options/validate.js";

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
  const option = given.tenantLimit !== undefined ? given.tenantLimit : defaults.limit;
  if (option === undefined) {
    throw new ValidationError(
      "tenantLimit",
      `tenant "${name}" has no tenantLimit: pass tenantLimit with the call or to semaphore(...). ${limitFix}`,
    );
  }
  const tenantLimit =
    typeof option === "function" ? answerOf(option, name, limit) : integerAtLeast("tenantLimit", option, 1, limitFix);
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

/** What a tenantLimit function answers for `tenant`: a whole number from 1 to the id's limit, or a ValidationError saying what it returned. */
function answerOf(cap: (tenant: string) => unknown, tenant: string, limit: number): number {
  let answer: unknown;
  try {
    answer = cap(tenant);
  } catch (error) {
    throw new ValidationError(
      "tenantLimit",
      `the tenantLimit function threw for tenant "${tenant}": ${error instanceof Error ? error.message : String(error)}. Make it return the tenant's cap, a whole number from 1 to the limit (${limit}).`,
    );
  }
  if (typeof answer === "number" && Number.isSafeInteger(answer) && answer >= 1 && answer <= limit) return answer;
  const why =
    typeof answer === "number" && Number.isSafeInteger(answer) && answer > limit ? `, above the id's limit ${limit}` : "";
  throw new ValidationError(
    "tenantLimit",
    `the tenantLimit function returned ${show(answer)} for tenant "${tenant}"${why}; it must return a whole number from 1 to the limit (${limit}). ${limitFix}`,
  );
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
