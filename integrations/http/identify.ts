import { ValidationError } from "../../src/errors/index.js";
import { unprefixed } from "../../src/errors/validation.js";
import { id as checkId, tenant as checkTenant } from "../../src/options/validate.js";
import type { AdmissionConfig } from "./config.js";

/** Who a request is for, and the most permits that tenant may hold. */
export interface RequestTenant {
  name: string;
  limit: number;
}

/**
 * The lease id of a request: the route's name, or `<name>:<key(request)>`.
 * Checked here, before any slot is taken; a throwing key function propagates.
 */
export function requestId<Req>(config: AdmissionConfig<Req, unknown>, request: Req): string {
  const { key, name } = config;
  if (key === undefined) return name;
  const part = key(request);
  if (typeof part !== "string" || part.length === 0) {
    throw new ValidationError(
      "key",
      `the key function of "${name}" returned ${typeof part === "string" ? "an empty string" : String(part)}; it must return a non-empty string (a tenant id, an order id). Reject requests that lack one before this middleware, or skip them with skip().`,
    );
  }
  const id = `${name}:${part}`;
  try {
    return checkId(id);
  } catch (error) {
    throw new ValidationError("key", `the key function of "${name}" returned an unusable value: ${unprefixed(error)}`);
  }
}

/**
 * The tenant of a request and its cap, for a route with `tenant`: checked
 * here, before any slot is taken, like the key. `undefined` for a route
 * without tenants; `null` when the request names none (answered 400
 * `tenant-missing`). A throwing `tenant` or `tenantLimit` function propagates.
 */
export function requestTenant<Req>(
  config: AdmissionConfig<Req, unknown>,
  request: Req,
  limit: number,
): RequestTenant | undefined | null {
  const { tenant, tenantLimit, name } = config;
  if (tenant === undefined) return undefined;
  const named = tenant(request);
  if (named === undefined) return null;
  let checked: string;
  try {
    checked = checkTenant(named);
  } catch (error) {
    const what =
      named === ""
        ? "an empty string; it must return a non-empty string naming who the request is for."
        : `an unusable value: ${unprefixed(error)}`;
    throw new ValidationError(
      "tenant",
      `the tenant function of "${name}" returned ${what} Reject requests that lack one before this middleware, or skip them with skip().`,
    );
  }
  const cap = typeof tenantLimit === "function" ? tenantLimit(checked) : (tenantLimit as number);
  if (typeof cap !== "number" || !Number.isSafeInteger(cap) || cap < 1 || cap > limit) {
    // A number was checked at creation, against a limit that is a number; a limit function answers per request.
    const given = typeof tenantLimit === "function" ? `the tenantLimit function of "${name}" returned` : "tenantLimit is";
    throw new ValidationError(
      "tenantLimit",
      `${given} ${String(cap)} for tenant "${checked}"; it must be a whole number from 1 to the limit (${limit}).`,
    );
  }
  return { name: checked, limit: cap };
}
