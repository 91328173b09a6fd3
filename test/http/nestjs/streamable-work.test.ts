// A NestJS handler that answers with a `StreamableFile` returns at once; the stream's producer (here
// an async generator) works while Nest pipes it. That is the request's work: its permit is held
// until the stream ends or is destroyed, also after the client left (Nest destroys the stream then;
// the generator's current step and its `finally` come first). Found by the adapter model (issue
// #27, test/model/adapter.test.ts): the permit went back at the departure while the producer
// worked on. On the Express and the Fastify platform, on the embedded store and Redis.
import "reflect-metadata";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { Readable } from "node:stream";
import { Controller, Get, type INestApplication, Module, StreamableFile } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { ExpressAdapter } from "@nestjs/platform-express";
import { FastifyAdapter } from "@nestjs/platform-fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Lease, LeaseholdModule, Semaphore, type SemaphoreLease } from "../../../integrations/nestjs/index.js";
import { CHANNELS, semaphore } from "../../../src/index.js";
import type { Store } from "../../../src/store/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually } from "../../support/stores.js";
import { bothStores } from "../frameworks.js";
import { getOnce } from "../harness.js";
import { listenNest } from "../nest-app.js";

/** What the producer did, and the gate its second step waits at. */
class Producer {
  lease: SemaphoreLease | undefined;
  started = false;
  finished = false;
  open!: () => void;
  readonly gate = new Promise<void>((resolve) => {
    this.open = resolve;
  });
}

function appModule(store: Store, prefix: string, producer: Producer) {
  @Controller()
  class FileController {
    @Get("file")
    @Semaphore("file", 1, { disconnectGraceMs: 60_000 })
    file(@Lease() lease: SemaphoreLease) {
      producer.lease = lease;
      const body = async function* () {
        producer.started = true;
        try {
          yield "first\n";
          // A step that ignores the signal: still work after the client left.
          await producer.gate;
          yield "rest\n";
        } finally {
          producer.finished = true;
        }
      };
      return new StreamableFile(Readable.from(body()));
    }
  }

  @Module({ imports: [LeaseholdModule.forRoot({ client: store, prefix })], controllers: [FileController] })
  class AppModule {}
  return AppModule;
}

const PLATFORMS = [
  { platform: "express", adapter: () => new ExpressAdapter() },
  { platform: "fastify", adapter: () => new FastifyAdapter() },
];

describe.each(PLATFORMS)("NestJS on $platform: a StreamableFile's producer is the request's work", ({ adapter }) => {
  describe.each(bothStores)("on the $name store", ({ make }) => {
    let store: Store;
    let prefix: string;
    let producer: Producer;
    let app: INestApplication;
    let url: string;
    let lost: unknown[];
    const onLost = (event: unknown) => lost.push(event);
    const count = () => semaphore({ client: store, limit: 1, prefix }).count("file");

    beforeEach(async () => {
      store = make();
      prefix = uniquePrefix("nest-streamable");
      producer = new Producer();
      lost = [];
      subscribe(CHANNELS.lost, onLost);
      app = await NestFactory.create(appModule(store, prefix, producer), adapter(), { logger: false });
      url = (await listenNest(app)).url;
    });

    afterEach(async () => {
      unsubscribe(CHANNELS.lost, onLost);
      producer.open();
      await app.close();
    });

    it("a client that leaves after the first chunk: the permit waits for the producer's step, then returns without a loss", async () => {
      const leaving = getOnce(`${url}/file`);
      await eventually(() => producer.started);
      leaving.leave();
      // The departure is heard: the handler's signal aborts, and the producer is still at work.
      const lease = producer.lease as SemaphoreLease;
      await eventually(() => lease.signal.aborted);
      expect(producer.finished).toBe(false);
      expect(await count()).toBe(1);
      producer.open();
      await eventually(() => producer.finished);
      await eventually(async () => (await count()) === 0);
      expect(lost).toEqual([]);
    });

    it("a stream read to its end: the permit returns with it", async () => {
      producer.open();
      const answer = await getOnce(`${url}/file`).answer;
      expect(answer).toMatchObject({ status: 200, body: "first\nrest\n", complete: true });
      await eventually(async () => (await count()) === 0);
      expect(producer.finished).toBe(true);
      expect(lost).toEqual([]);
    });
  });
});
