// The NestJS handler's promise is found through a hidden parameter. Nest runs
// every global pipe on custom parameters (their type is a string: pipeable), so a global pipe that
// rebuilds objects (a deep sanitizer, a trim-every-string pipe) could hand the handler a copy instead
// of the work. A regression: the handler's promise went untracked, and a permit went back while the
// handler, past an outer timeout(), still called the resource.
import "reflect-metadata";
import { Controller, Get, Injectable, Param, type PipeTransform, UseInterceptors } from "@nestjs/common";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { Semaphore } from "../../../integrations/nestjs/index.js";
import { memoryStore, semaphore } from "../../../src/index.js";
import { eventually, gate } from "../../support/stores.js";
import type { RunningApp } from "../harness.js";
import { listenNestWith, RetryOnce, Timeout } from "../nest-app.js";

/** A global pipe that trims every string, objects' included: it rebuilds every object it is given. */
@Injectable()
class DeepTrim implements PipeTransform {
  transform(value: unknown): unknown {
    if (typeof value === "string") return value.trim();
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, typeof v === "string" ? v.trim() : v]));
    }
    return value;
  }
}

const work = { gate: gate(), ended: 0, calls: 0 };

@Controller("trim")
class TrimController {
  @Get(":id")
  @Semaphore("nest-object-pipe", 1)
  @UseInterceptors(Timeout)
  async slow(@Param("id") id: string) {
    await work.gate.opened;
    work.ended++;
    return id;
  }
}

@Controller("again")
class RetryController {
  @Get(":id")
  // Applied last: the innermost interceptor, inside leasehold's (the outermost is the timeout).
  @UseInterceptors(RetryOnce)
  @Semaphore("nest-pipe-retry", 1)
  @UseInterceptors(Timeout)
  async flaky(@Param("id") id: string) {
    if (++work.calls === 1) throw new Error("first call fails");
    await work.gate.opened;
    work.ended++;
    return id;
  }
}

describe("NestJS handler work under a global pipe that rebuilds objects", () => {
  let running: RunningApp | undefined;
  afterEach(async () => {
    work.gate.open();
    await running?.close();
  });

  it("keeps the permit while the handler still runs past a timeout()", async () => {
    const store = memoryStore();
    running = await listenNestWith([TrimController], store, (app) => app.useGlobalPipes(new DeepTrim()));
    work.gate = gate();
    work.ended = 0;
    const count = () => semaphore({ client: store, limit: 1 }).count("nest-object-pipe");

    expect((await request(running.url).get("/trim/a")).status).toBe(408);
    // The handler is still at work: its permit is held, and the next request is refused.
    expect(work.ended).toBe(0);
    expect(await count()).toBe(1);
    expect((await request(running.url).get("/trim/b")).status).toBe(503);
    work.gate.open();
    await eventually(() => work.ended >= 1);
    await eventually(async () => (await count()) === 0);
  });

  it("keeps the permit while a handler called again by retry() still runs past a timeout()", async () => {
    const store = memoryStore();
    running = await listenNestWith([RetryController], store, (app) => app.useGlobalPipes(new DeepTrim()));
    work.gate = gate();
    work.ended = 0;
    work.calls = 0;
    const count = () => semaphore({ client: store, limit: 1 }).count("nest-pipe-retry");

    expect((await request(running.url).get("/again/a")).status).toBe(408);
    expect(work.calls).toBe(2);
    expect(work.ended).toBe(0);
    expect(await count()).toBe(1);
    work.gate.open();
    await eventually(() => work.ended >= 1);
    await eventually(async () => (await count()) === 0);
  });
});
