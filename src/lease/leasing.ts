import { acquireLease } from "../acquire/acquire.js";
import { publishAcquired } from "../acquire/outcomes.js";
import type { Acquired, Refused } from "../acquire/types.js";
import { withoutStack } from "../errors/base.js";
import { ValidationError } from "../errors/index.js";
import { subjectOf } from "../observability/events.js";
import type { Subject } from "../observability/types.js";
import { type CallSettings, type Defaults, type LeaseOption, resolveDefaults } from "../options/settings.js";
import type { CloseOptions } from "../options/types.js";
import { id as checkId, knownOptions, optionsObject } from "../options/validate.js";
import { bounded, send } from "../store/access/bounded.js";
import { breakerOf, healthOfSource } from "../store/access/breaker.js";
import type { StoreHealth } from "../store/access/types.js";
import { isInspection } from "../store/contract/replies.js";
import type { Inspection, Store } from "../store/contract/types.js";
import type { LeaseCall } from "./call.js";
import { LeaseHandle } from "./handle.js";
import { Holdings } from "./holdings.js";
import { keepLease } from "./keeper.js";

/**
 * What differs between a semaphore and a lock in the steps they share here,
 * besides their calls (see `LeaseCall`): as `Primitive` does for the stores.
 */
export interface Primitive {
  readonly kind: "semaphore" | "lock";
  /** The lease length option, and its default. */
  readonly leaseOption: LeaseOption;
  readonly defaultLeaseMs: number;
  readonly acquireOptions: readonly string[];
  readonly runOptions: readonly string[];
  /** What `run` holds, in its messages: "permit" or "lock". */
  readonly holds: string;
  /** The store's inspection of an id's holders. */
  inspect(store: Store, storeKey: string): Promise<Inspection>;
}

/** The lease, or why not: `acquire` resolves `null` for the latter. */
const leaseOrNull = <L extends LeaseHandle>(outcome: L | Refused): L | null => (outcome instanceof LeaseHandle ? outcome : null);

/** A lease its caller no longer wants: released, then the caller's abort reason thrown. */
async function giveBack(lease: LeaseHandle, reason: unknown): Promise<never> {
  await lease.release().catch(() => {});
  throw reason;
}

/**
 * The steps a semaphore and a lock share: `acquire`, `run`, `health`,
 * `close`, and the store reads. Each adds how it checks one call's options
 * into a `LeaseCall` (`prepare`) and its own reads.
 */
export abstract class Leasing<L extends LeaseHandle> {
  protected readonly defaults: Defaults;
  protected readonly holdings: Holdings;
  readonly #primitive: Primitive;
  #quietRefusals = false;

  /** `options`: the factory's, as `factoryOptions` gathered them. */
  constructor(primitive: Primitive, options: Record<string, unknown>) {
    this.#primitive = primitive;
    this.holdings = new Holdings(primitive.kind);
    this.defaults = resolveDefaults(
      options,
      primitive.kind,
      primitive.leaseOption,
      primitive.defaultLeaseMs,
      this.holdings.signal,
    );
  }

  /** Checks everything about one call, before any slot is taken. */
  protected abstract prepare(id: string, options: object | undefined, keeping: boolean): LeaseCall<L>;

  acquire(id: string, options?: object): Promise<L | null> {
    try {
      const call = this.prepare(id, options, false);
      const outcome = this.#take(call);
      if (outcome instanceof Promise) return outcome.then(leaseOrNull);
      if (!(outcome instanceof LeaseHandle)) return Promise.resolve(null);
      // Answered in this turn (the embedded store): the caller may still abort, or close() begin,
      // before the caller sees the lease, as while a store's answer travels; then the lease goes
      // back and the call rejects, whichever store answered.
      const own = call.settings.signal;
      const closing = this.holdings.signal;
      return Promise.resolve().then(() => {
        if (own?.aborted === true) return giveBack(outcome, own.reason);
        return closing.aborted ? giveBack(outcome, closing.reason) : outcome;
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  run<T>(id: string, fn: (lease: L) => T | PromiseLike<T>, options?: object): Promise<T> {
    try {
      if (typeof fn !== "function") {
        throw new ValidationError("fn", `run(id, fn) needs a function to run while the ${this.#primitive.holds} is held.`);
      }
      const call = this.prepare(id, options, true);
      const taken = this.#take(call);
      if (taken instanceof Promise) return taken.then((outcome) => this.#keep(call, outcome, fn, false));
      return this.#keep(call, taken, fn, true);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * For the HTTP adapters' entry point (`semaphoreEngine()`, `lockEngine()`):
   * `run`'s refusal errors are made without a stack trace. A refusal is an
   * answer the adapter turns into a response, and capturing its stack was a
   * third of a refused request's CPU. Public factories keep their stacks.
   */
  protected refuseWithoutStack(): void {
    this.#quietRefusals = true;
  }

  /**
   * `run` once the acquisition answered: the lease kept while `fn` runs, or
   * the refusal thrown. `now`: answered in this turn, so the acquire's clock
   * reading is still the time (one reading fewer).
   */
  #keep<T>(call: LeaseCall<L>, outcome: L | Refused, fn: (lease: L) => T | PromiseLike<T>, now: boolean): Promise<T> {
    if (!(outcome instanceof LeaseHandle)) {
      throw this.#quietRefusals ? withoutStack(() => call.notAcquired(outcome)) : call.notAcquired(outcome);
    }
    return keepLease(outcome, fn, call.settings, now ? outcome.heldSince : undefined);
  }

  health(): Promise<StoreHealth> {
    return healthOfSource(this.defaults.source);
  }

  close(options?: CloseOptions): Promise<void> {
    return this.holdings.close(options, this.defaults.source);
  }

  /** The settings of a call that passed no options: the factory's, resolved once. */
  protected plainSettings(keeping: boolean): CallSettings {
    return keeping ? this.defaults.plain.run : this.defaults.plain.acquire;
  }

  /** One call's options, checked as an object of known names; then `resolveCall` them over the factory's. */
  protected givenOptions(options: object, keeping: boolean): Record<string, unknown> {
    const { kind, acquireOptions, runOptions } = this.#primitive;
    const given = optionsObject(options, keeping ? "run" : "acquire");
    knownOptions(given, keeping ? runOptions : acquireOptions, `${kind} ${keeping ? "run" : "acquire"}`);
    return given;
  }

  /** The store key of `id`, for a read: refused once closed, the id checked. */
  protected storeKeyOf(id: string): string {
    this.holdings.refuse();
    return this.defaults.storeKeys.of(checkId(id));
  }

  /**
   * A read (stats, count), bounded by the store's timeout, its answer
   * checked; refused at once while the store is known to be down.
   */
  protected async read<T>(
    storeKey: string,
    operation: string,
    ask: (store: Store) => Promise<T>,
    check: (reply: unknown) => boolean,
    subject: Subject,
  ): Promise<T> {
    const store = await this.defaults.source.get();
    breakerOf(store)?.admit(this.#primitive.kind, storeKey);
    return bounded(
      store,
      operation,
      send(() => ask(store)),
      check,
      subject,
    );
  }

  /**
   * Who holds `id` now, as the store's inspection says: one round trip, no
   * writes, sent even while the store is known to be down.
   */
  protected async inspect(id: string, operation: string): Promise<Inspection> {
    const storeKey = this.storeKeyOf(id);
    const store = await this.defaults.source.get();
    const { kind, inspect } = this.#primitive;
    return bounded(store, operation, inspect(store, storeKey), isInspection, subjectOf(kind, id));
  }

  /** The lease, or why not; in the same turn when the store can answer at once (the embedded one). */
  #take(call: LeaseCall<L>): L | Refused | Promise<L | Refused> {
    const holdings = this.holdings;
    holdings.refuse();
    const { settings } = call;
    const linked = holdings.follow(settings);
    let outcome: Acquired | Refused | Promise<Acquired | Refused>;
    try {
      outcome = acquireLease(this.defaults.source, linked?.settings ?? settings, call);
    } catch (error) {
      linked?.unlink();
      throw error;
    }
    if (!(outcome instanceof Promise)) {
      linked?.unlink();
      return this.#handle(call, outcome);
    }
    // Answered later: close() waits for it, and takes back a lease it brings after close() began.
    holdings.started();
    return outcome.then(
      (had) => {
        try {
          return this.#handle(call, had);
        } finally {
          holdings.ended(linked);
        }
      },
      (error: unknown) => {
        holdings.ended(linked);
        throw error;
      },
    );
  }

  #handle(call: LeaseCall<L>, outcome: Acquired | Refused): L | Refused {
    if (!outcome.acquired) return outcome;
    publishAcquired(call, outcome);
    call.store = outcome.store;
    return this.holdings.adopt(call.lease(outcome));
  }
}
