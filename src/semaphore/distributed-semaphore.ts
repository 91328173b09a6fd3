import { ValidationError } from "../errors/index.js";
import { Leasing, type Primitive } from "../lease/leasing.js";
import { byAge, checkOwner, defaultOwner, holderOf } from "../lease/owner.js";
import { limitTag, ownerTag, TokenTag } from "../lease/token.js";
import type { Holder } from "../lease/types.js";
import { subjectOf } from "../observability/events.js";
import { SEMAPHORE_LEASE_MS } from "../options/defaults.js";
import {
  SEMAPHORE_ACQUIRE_OPTIONS,
  SEMAPHORE_FACTORY_OPTIONS,
  SEMAPHORE_RUN_OPTIONS,
  TENANT_STATS_OPTIONS,
} from "../options/lists.js";
import { factoryOptions, resolveCall } from "../options/settings.js";
import type { TenantCallOptions } from "../options/types.js";
import { id as checkId, integerAtLeast, knownOptions, optionsObject } from "../options/validate.js";
import { isCount, isCounts } from "../store/contract/replies.js";
import type { SemaphoreCounts } from "../store/contract/types.js";
import { SemaphoreCall, type SemaphoreLeaseHandle } from "./call.js";
import { type TenantDefaults, tenantDefaults, tenantOfCall } from "./tenants.js";
import type { Semaphore, SemaphoreStats, TenantStats } from "./types.js";

const SEMAPHORE: Primitive = {
  kind: "semaphore",
  leaseOption: "leaseMs",
  defaultLeaseMs: SEMAPHORE_LEASE_MS,
  acquireOptions: SEMAPHORE_ACQUIRE_OPTIONS,
  runOptions: SEMAPHORE_RUN_OPTIONS,
  holds: "permit",
  inspect: (store, storeKey) => store.semaphore.inspect({ storeKey: storeKey }),
};

const limitFix = "Pass how many holders are allowed at once, e.g. limit: 20.";

function checkLimit(value: unknown): number {
  return integerAtLeast("limit", value, 1, limitFix);
}

/** The semaphore behind {@link semaphore}: the shared steps (see `Leasing`), its limits, tenants and reads. */
export class DistributedSemaphore extends Leasing<SemaphoreLeaseHandle> implements Semaphore {
  readonly #limit: number | ((id: string) => number);
  readonly #tenants: TenantDefaults;
  /** The default owner's token tag (see `ownerTag`). */
  readonly #owner: string;
  /** The token tags of calls with the default owner, by limit (one, unless the limit is a function or a call passes its own). */
  readonly #tags = new Map<number, TokenTag>();

  /** One for the HTTP adapters (`semaphoreEngine()`): its refusals carry no stack trace. */
  static forEngine(args: readonly unknown[]): DistributedSemaphore {
    const made = new DistributedSemaphore(args);
    made.refuseWithoutStack();
    return made;
  }

  /** `args`: either call form of {@link semaphore}. */
  constructor(args: readonly unknown[]) {
    const options = factoryOptions(args, "semaphore", SEMAPHORE_FACTORY_OPTIONS);
    if (options.limit === undefined) {
      throw new ValidationError("limit", `\`limit\` is required. ${limitFix}`);
    }
    const limit = typeof options.limit === "function" ? (options.limit as (id: string) => number) : checkLimit(options.limit);
    super(SEMAPHORE, options);
    this.#limit = limit;
    this.#tenants = tenantDefaults(options, typeof limit === "number" ? limit : undefined);
    this.#owner = ownerTag(options.owner === undefined ? defaultOwner() : checkOwner(options.owner));
  }

  async count(id: string): Promise<number> {
    const storeKey = this.storeKeyOf(id);
    return this.read(
      storeKey,
      "count",
      (store) => store.semaphore.count({ storeKey: storeKey }),
      isCount,
      subjectOf("semaphore", id),
    );
  }

  stats(id: string): Promise<SemaphoreStats>;
  stats(id: string, options: { tenant: string; tenantLimit?: number | ((tenant: string) => number) }): Promise<TenantStats>;
  async stats(
    id: string,
    options?: { tenant: string; tenantLimit?: number | ((tenant: string) => number) },
  ): Promise<SemaphoreStats | TenantStats> {
    const storeKey = this.storeKeyOf(id);
    const limit = this.#limitFor(id);
    const given = options === undefined ? undefined : optionsObject(options, "stats");
    if (given !== undefined) knownOptions(given, TENANT_STATS_OPTIONS, "semaphore stats");
    const tenant = given === undefined ? undefined : tenantOfCall(this.#tenants, given, limit, 1);
    const figures = await this.read<SemaphoreCounts>(
      storeKey,
      "stats",
      (store) => store.semaphore.stats({ storeKey: storeKey, tenant: tenant?.name }),
      isCounts,
      subjectOf("semaphore", id, tenant?.name),
    );
    if (tenant === undefined) {
      return {
        limit,
        used: figures.used,
        holders: figures.holders,
        waiting: figures.waiting,
        available: Math.max(0, limit - figures.used),
        tenants: figures.tenants ?? 0,
      };
    }
    const { used, waiting } = figures;
    return { tenant: tenant.name, limit: tenant.limit, used, waiting, available: Math.max(0, tenant.limit - used) };
  }

  async holders(id: string): Promise<Holder[]> {
    const seen = await this.inspect(id, "holders");
    const now = Date.now();
    return seen.holders.map((entry) => holderOf(entry, now)).sort(byAge);
  }

  protected prepare(id: string, options: object | undefined, keeping: boolean): SemaphoreCall {
    checkId(id);
    const storeKey = this.defaults.storeKeys.of(id);
    if (options === undefined) {
      const limit = this.#limitFor(id);
      return new SemaphoreCall(id, storeKey, this.plainSettings(keeping), limit, 1, this.#tagFor(limit), undefined);
    }
    const given = this.givenOptions(options, keeping);
    const settings = resolveCall(this.defaults, given, keeping);
    const limit = given.limit !== undefined ? checkLimit(given.limit) : this.#limitFor(id);
    const weight =
      given.weight === undefined ? 1 : integerAtLeast("weight", given.weight, 1, "Pass how many permits one call takes.");
    if (weight > limit) {
      throw new ValidationError(
        "weight",
        `\`weight\` ${weight} is above the limit ${limit} of "${id}": such a call could never be admitted. Lower the weight or raise the limit.`,
      );
    }
    const tenant = tenantOfCall(this.#tenants, given as TenantCallOptions, limit, weight);
    const tag =
      given.owner === undefined ? this.#tagFor(limit) : new TokenTag(limitTag(ownerTag(checkOwner(given.owner)), limit));
    return new SemaphoreCall(id, storeKey, settings, limit, weight, tag, tenant);
  }

  #tagFor(limit: number): TokenTag {
    let tag = this.#tags.get(limit);
    if (tag === undefined) {
      // Bounded: a limit function with many answers makes a few more tags, never a growing map.
      if (this.#tags.size >= 64) this.#tags.clear();
      tag = new TokenTag(limitTag(this.#owner, limit));
      this.#tags.set(limit, tag);
    }
    return tag;
  }

  #limitFor(id: string): number {
    if (typeof this.#limit === "number") return this.#limit;
    let value: unknown;
    try {
      value = this.#limit(id);
    } catch (error) {
      throw new ValidationError(
        "limit",
        `the limit function threw for "${id}": ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    return checkLimit(value);
  }
}
