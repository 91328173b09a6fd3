import type { LeaseHandle } from "../lease/handle.js";
import { Leasing, type Primitive } from "../lease/leasing.js";
import { checkOwner, defaultOwner, holderOf } from "../lease/owner.js";
import { ownerTag, TokenTag } from "../lease/token.js";
import type { Holder } from "../lease/types.js";
import { subjectOf } from "../observability/events.js";
import { LOCK_TTL_MS } from "../options/defaults.js";
import { LOCK_ACQUIRE_OPTIONS, LOCK_FACTORY_OPTIONS, LOCK_RUN_OPTIONS } from "../options/lists.js";
import { factoryOptions, resolveCall } from "../options/settings.js";
import { id as checkId } from "../options/validate.js";
import { isLockStats } from "../store/contract/replies.js";
import type { LockStats } from "../store/contract/types.js";
import { LockCall } from "./call.js";
import type { Lock } from "./types.js";

const LOCK: Primitive = {
  kind: "lock",
  leaseOption: "ttlMs",
  defaultLeaseMs: LOCK_TTL_MS,
  acquireOptions: LOCK_ACQUIRE_OPTIONS,
  runOptions: LOCK_RUN_OPTIONS,
  holds: "lock",
  inspect: (store, storeKey) => store.lock.inspect({ storeKey: storeKey }),
};

/** The lock behind {@link lock}: the shared steps (see `Leasing`) and its reads. */
export class DistributedLock extends Leasing<LeaseHandle> implements Lock {
  /** The default owner's token tag (see `ownerTag`). */
  readonly #tag: TokenTag;

  /** One for the HTTP adapters (`lockEngine()`): its refusals carry no stack trace. */
  static forEngine(args: readonly unknown[]): DistributedLock {
    const made = new DistributedLock(args);
    made.refuseWithoutStack();
    return made;
  }

  /** `args`: either call form of {@link lock}. */
  constructor(args: readonly unknown[]) {
    const options = factoryOptions(args, "lock", LOCK_FACTORY_OPTIONS);
    super(LOCK, options);
    this.#tag = new TokenTag(ownerTag(options.owner === undefined ? defaultOwner() : checkOwner(options.owner)));
  }

  async stats(id: string): Promise<LockStats> {
    const storeKey = this.storeKeyOf(id);
    return this.read(storeKey, "stats", (store) => store.lock.stats({ storeKey: storeKey }), isLockStats, subjectOf("lock", id));
  }

  async holder(id: string): Promise<Holder | null> {
    const held = (await this.inspect(id, "holder")).holders[0];
    return held === undefined ? null : holderOf(held, Date.now());
  }

  protected prepare(id: string, options: object | undefined, keeping: boolean): LockCall {
    checkId(id);
    const storeKey = this.defaults.storeKeys.of(id);
    if (options === undefined) return new LockCall(id, storeKey, this.plainSettings(keeping), this.#tag);
    const given = this.givenOptions(options, keeping);
    const settings = resolveCall(this.defaults, given, keeping);
    const tag = given.owner === undefined ? this.#tag : new TokenTag(ownerTag(checkOwner(given.owner)));
    return new LockCall(id, storeKey, settings, tag);
  }
}
