// Issue #27, the inherited-route case: a class-level @Semaphore counts the handlers Nest serves under it,
// also those the class inherits (a generic CRUD base controller) and those of a controller that
// inherits the decorator from its base class. Behind a global timeout() interceptor the handler's
// observable ends at the timeout while its promise still runs: the permit must follow the promise.
// Only the methods the decorated class itself declared reported their promise; an inherited route,
// or a derived controller's route under a decorated base, gave its permit back at the timeout and
// let a second and a third handler work at once. On the Express and the Fastify platform, on the
// embedded store and Redis.
import "reflect-metadata";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { Controller, Get, type INestApplication, Module, Param, type Type } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { ExpressAdapter } from "@nestjs/platform-express";
import { FastifyAdapter } from "@nestjs/platform-fastify";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { LeaseholdModule, Semaphore } from "../../../integrations/nestjs/index.js";
import { CHANNELS, semaphore } from "../../../src/index.js";
import type { Store } from "../../../src/store/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, gate } from "../../support/stores.js";
import { bothStores } from "../frameworks.js";
import { listenNest, Timeout } from "../nest-app.js";

/** The handlers' shared record: how many work now, the most that worked at once, and the gate they wait at. */
const work = { gate: gate(), working: 0, most: 0, ended: 0 };

async function slowly(id: string): Promise<string> {
  work.working++;
  work.most = Math.max(work.most, work.working);
  await work.gate.opened;
  work.working--;
  work.ended++;
  return id;
}

/** A generic base controller: its route is served by every controller that extends it. */
class CrudController {
  @Get(":id")
  async find(@Param("id") id: string) {
    return slowly(id);
  }
}

@Controller("own")
@Semaphore("own-work", 1)
class OwnController {
  @Get(":id")
  async find(@Param("id") id: string) {
    return slowly(id);
  }
}

@Controller("inherited")
@Semaphore("inherited-work", 1)
class InheritedController extends CrudController {}

/** The limit on a base class, the route on the controller that extends it. */
@Semaphore("derived-work", 1)
class LimitedController {}

@Controller("derived")
class DerivedController extends LimitedController {
  @Get(":id")
  async find(@Param("id") id: string) {
    return slowly(id);
  }
}

/** Both at once: a route inherited from a base class that is not decorated, under a decorated middle class. */
@Semaphore("both-work", 1)
class LimitedCrudController extends CrudController {}

@Controller("both")
class BothController extends LimitedCrudController {}

const CASES: [string, Type, string][] = [
  ["declared by the decorated controller", OwnController, "own"],
  ["inherited from a base controller", InheritedController, "inherited"],
  ["declared by a controller whose base class is decorated", DerivedController, "derived"],
  ["inherited by a controller whose base class is decorated", BothController, "both"],
];

const PLATFORMS = [
  { platform: "express", adapter: () => new ExpressAdapter() },
  { platform: "fastify", adapter: () => new FastifyAdapter() },
];

describe.each(PLATFORMS)("NestJS on $platform: a class-level @Semaphore behind a global timeout()", ({ adapter }) => {
  describe.each(bothStores)("on the $name store", ({ make }) => {
    let app: INestApplication | undefined;
    let lost: unknown[] = [];
    const onLost = (event: unknown) => lost.push(event);

    afterEach(async () => {
      unsubscribe(CHANNELS.lost, onLost);
      work.gate.open();
      await app?.close();
      app = undefined;
    });

    it.each(CASES)("a route %s keeps its permit while its handler works past the timeout", async (_case, controller, path) => {
      const store: Store = make();
      const prefix = uniquePrefix("nest-inherited");
      @Module({ imports: [LeaseholdModule.forRoot({ client: store, prefix })], controllers: [controller] })
      class AppModule {}
      app = await NestFactory.create(AppModule, adapter(), { logger: false });
      app.useGlobalInterceptors(new Timeout());
      const { url } = await listenNest(app);
      Object.assign(work, { gate: gate(), working: 0, most: 0, ended: 0 });
      lost = [];
      subscribe(CHANNELS.lost, onLost);
      const count = () => semaphore({ client: store, limit: 1, prefix }).count(`${path}-work`);

      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await request(url).get(`/${path}/${i}`)).status);
      // The first handler still works: its permit is held, and it is the only one that started.
      expect({ statuses, working: work.working, most: work.most, count: await count() }).toEqual({
        statuses: [408, 503, 503],
        working: 1,
        most: 1,
        count: 1,
      });

      work.gate.open();
      await eventually(() => work.ended === 1);
      await eventually(async () => (await count()) === 0);
      // Its end was seen: the permit came back with it, not at a grace's end reported as a loss.
      expect(lost).toEqual([]);
      expect((await request(url).get(`/${path}/again`)).status).toBe(200);
    });
  });
});
