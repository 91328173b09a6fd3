// Issue #27, defect 5 (NestJS): a handler that passes its lease's signal to its work and lets the
// rejection propagate, as the docs recommend, gets the documented problem response, on the Express and
// the Fastify platform, without the app registering anything: a ShutdownError at shutdown 503
// shutting-down, a lease lost before the response started 503 lease-lost, and a ClientAbortedError no
// answer. None of them is logged as an unknown error by Nest's exception handler.
import "reflect-metadata";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { type ArgumentsHost, Catch, Controller, Get, type INestApplication, type LoggerService, Module } from "@nestjs/common";
import { APP_FILTER, BaseExceptionFilter, NestFactory } from "@nestjs/core";
import { ExpressAdapter } from "@nestjs/platform-express";
import { FastifyAdapter } from "@nestjs/platform-fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Lease, LeaseholdModule, PROBLEM_TYPES, Semaphore, type SemaphoreLease } from "../../../integrations/nestjs/index.js";
import { CHANNELS, semaphore } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import type { Store } from "../../../src/store/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, spyStore } from "../../support/stores.js";
import { bothStores } from "../frameworks.js";
import { getOnce } from "../harness.js";

/** Rejects with the signal's reason when it aborts: work that stops when told. */
const stopsWhenTold = (signal: AbortSignal): Promise<never> =>
  new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));

/** What one app saw: the handlers entered, their leases, the errors its filter met, and what Nest logged as errors. */
class Seen {
  readonly entered: string[] = [];
  readonly leases: SemaphoreLease[] = [];
  readonly filtered: unknown[] = [];
  readonly logged: unknown[] = [];
}

/**
 * Nest's own exception filter, as every app has it, watched: what reaches it is recorded before it
 * answers (and logs what it does not know), so the test knows when the error has been handled.
 */
function watchedFilter(seen: Seen) {
  @Catch()
  class Watched extends BaseExceptionFilter {
    override catch(error: unknown, host: ArgumentsHost) {
      seen.filtered.push(error);
      super.catch(error, host);
    }
  }
  return Watched;
}

function appModule(store: Store, prefix: string, seen: Seen) {
  @Controller()
  class WorkController {
    @Get("work")
    @Semaphore("work", 1, { heartbeatMs: 20, disconnectGraceMs: 60_000 })
    async work(@Lease() lease: SemaphoreLease) {
      seen.entered.push("work");
      seen.leases.push(lease);
      return await stopsWhenTold(lease.signal);
    }

    /** A `timers/promises` timer rejects with an AbortError whose cause is the signal's reason. */
    @Get("timer")
    @Semaphore("timer", 1, { disconnectGraceMs: 60_000 })
    async timer(@Lease() lease: SemaphoreLease) {
      seen.entered.push("timer");
      seen.leases.push(lease);
      return await sleep(60_000, "late", { signal: lease.signal });
    }
  }

  @Module({
    imports: [LeaseholdModule.forRoot({ client: store, prefix, shutdownGraceMs: 60_000 })],
    controllers: [WorkController],
    providers: [{ provide: APP_FILTER, useClass: watchedFilter(seen) }],
  })
  class AppModule {}
  return AppModule;
}

const PLATFORMS = [
  { platform: "express", adapter: () => new ExpressAdapter() },
  { platform: "fastify", adapter: () => new FastifyAdapter() },
];

describe.each(PLATFORMS)(
  "NestJS on $platform: leasehold's own errors, propagated by the handler (issue #27, defect 5)",
  ({ adapter }) => {
    describe.each(bothStores)("on the $name store", ({ make }) => {
      let raw: Store;
      let calls: ReturnType<typeof spyStore>["calls"];
      let prefix: string;
      let seen: Seen;
      let lost: unknown[];
      let app: INestApplication | undefined;
      let url: string;
      const onLost = (event: unknown) => lost.push(event);
      const count = (id: string) => semaphore({ client: raw, limit: 1, prefix }).count(id);

      beforeEach(async () => {
        raw = make();
        const spied = spyStore(raw, {}, 2_000);
        calls = spied.calls;
        prefix = uniquePrefix("nest-own-errors");
        seen = new Seen();
        lost = [];
        subscribe(CHANNELS.lost, onLost);
        const logger: LoggerService = {
          log() {},
          warn() {},
          error: (...args: unknown[]) => void seen.logged.push(args),
        };
        app = await NestFactory.create(appModule(spied.store, prefix, seen), adapter(), { logger });
        await app.listen(0, "127.0.0.1");
        url = `http://127.0.0.1:${((app.getHttpServer() as Server).address() as AddressInfo).port}`;
      });

      afterEach(async () => {
        unsubscribe(CHANNELS.lost, onLost);
        await app?.close();
      });

      /** Every permit taken was given back exactly once. */
      const releasedOnceEach = async () => {
        await eventually(() => calls.semaphoreRelease === calls.semaphoreAcquire);
        expect(calls.semaphoreRelease).toBe(calls.semaphoreAcquire);
      };

      it.each(["work", "timer"])("/%s: a ShutdownError at shutdown is answered 503 shutting-down, not logged", async (id) => {
        const pending = getOnce(`${url}/${id}`).answer;
        await eventually(() => seen.entered.length === 1);
        const closing = app!.close();
        app = undefined;
        const answer = await pending;
        expect(answer).toMatchObject({ status: 503, complete: true });
        expect(answer.headers["content-type"]).toMatch(/^application\/problem\+json/);
        expect(answer.headers["retry-after"]).toBe("1");
        expect(JSON.parse(answer.body)).toMatchObject({ type: PROBLEM_TYPES["shutting-down"], status: 503, key: id });
        // The permit came back with the answer, long before the grace.
        await closing;
        expect(await count(id)).toBe(0);
        await releasedOnceEach();
        expect(lost).toEqual([]);
        expect(seen.filtered).toHaveLength(1);
        expect(seen.logged).toEqual([]);
      });

      it("a lease lost before the response started is answered 503 lease-lost, once, and not logged", async () => {
        const pending = getOnce(`${url}/work`).answer;
        await eventually(() => seen.entered.length === 1);
        // Removed behind its holder's back (an operator, an eviction): its next renewal finds it gone.
        await raw.semaphore.release({ storeKey: storeKey(prefix, "semaphore", "work"), token: seen.leases[0]!.token });
        const answer = await pending;
        expect(answer).toMatchObject({ status: 503, complete: true });
        expect(answer.headers["content-type"]).toMatch(/^application\/problem\+json/);
        expect(JSON.parse(answer.body)).toMatchObject({ type: PROBLEM_TYPES["lease-lost"], key: "work" });
        await releasedOnceEach();
        // A real loss: reported once, and only as a loss.
        expect(lost).toHaveLength(1);
        await eventually(() => seen.filtered.length === 1);
        expect(seen.logged).toEqual([]);
      });

      it.each(["work", "timer"])(
        "/%s: a ClientAbortedError needs no answer: the permit returns, nothing is reported or logged",
        async (id) => {
          const leaving = getOnce(`${url}/${id}`);
          await eventually(() => seen.entered.length === 1);
          leaving.leave();
          await eventually(() => seen.filtered.length === 1);
          expect(seen.logged).toEqual([]);
          await eventually(async () => (await count(id)) === 0);
          await releasedOnceEach();
          expect(lost).toEqual([]);
        },
      );
    });
  },
);
