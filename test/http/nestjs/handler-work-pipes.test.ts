// The NestJS handler's promise is found through a hidden parameter. Nest runs
// every global pipe on custom parameters (their type is a string: pipeable), so a global pipe that
// rebuilds objects (a deep sanitizer, a trim-every-string pipe) could hand the handler a copy instead
// of the work. A regression: the handler's promise went untracked, and a permit went back while the
// handler, past an outer timeout(), still called the resource.
// Issue #27: a pipe slower than the timeout. The handler's observable ends (408) before Nest calls the
// handler, which it still does once the pipe is done: the permit went back at the timeout, and that
// handler worked without one. It is held until the late call is seen to end, and when no call comes
// (the pipe failed), for disconnectGraceMs, then reported lost.
import "reflect-metadata";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { Controller, Get, Injectable, Param, type PipeTransform, UseInterceptors } from "@nestjs/common";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { Semaphore } from "../../../integrations/nestjs/index.js";
import { CHANNELS, memoryStore, semaphore } from "../../../src/index.js";
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

/** A global pipe that waits (a remote validation) until the test lets it through. */
@Injectable()
class SlowPipe implements PipeTransform {
  async transform(value: unknown): Promise<unknown> {
    await work.pipe.opened;
    if (value === "invalid") throw new Error("the pipe refused the parameter");
    return value;
  }
}

const work = { gate: gate(), pipe: gate(), ended: 0, calls: 0 };

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

@Controller("late")
class LateController {
  @Get(":id")
  @Semaphore("nest-late-call", 1)
  @UseInterceptors(Timeout)
  async slow(@Param("id") id: string) {
    work.calls++;
    await work.gate.opened;
    work.ended++;
    return id;
  }
}

const losses: unknown[] = [];

@Controller("never")
class NeverCalledController {
  @Get(":id")
  @Semaphore("nest-never-called", 1, { disconnectGraceMs: 1_000, onLeaseLost: (error) => losses.push(error) })
  @UseInterceptors(Timeout)
  async slow(@Param("id") id: string) {
    work.calls++;
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

  it("keeps the permit for a handler that a slow pipe lets Nest call after the timeout()", async () => {
    const store = memoryStore();
    running = await listenNestWith([LateController], store, (app) => app.useGlobalPipes(new SlowPipe()));
    Object.assign(work, { gate: gate(), pipe: gate(), ended: 0, calls: 0 });
    const lost: unknown[] = [];
    const onLost = (event: unknown) => lost.push(event);
    subscribe(CHANNELS.lost, onLost);
    const count = () => semaphore({ client: store, limit: 1 }).count("nest-late-call");
    try {
      expect((await request(running.url).get("/late/a")).status).toBe(408);
      // The pipe still runs, and Nest will call the handler after it: the permit is held.
      expect(await count()).toBe(1);
      expect((await request(running.url).get("/late/b")).status).toBe(503);
      work.pipe.open();
      await eventually(() => work.calls === 1);
      expect(await count()).toBe(1);
      work.gate.open();
      await eventually(() => work.ended === 1);
      await eventually(async () => (await count()) === 0);
      // The late call's end was seen: the permit came back with it, not reported lost.
      expect({ calls: work.calls, lost }).toEqual({ calls: 1, lost: [] });
    } finally {
      unsubscribe(CHANNELS.lost, onLost);
      work.pipe.open();
    }
  });

  it("holds the permit of a handler never called after the timeout() for disconnectGraceMs, then reports it lost", async () => {
    const store = memoryStore();
    running = await listenNestWith([NeverCalledController], store, (app) => app.useGlobalPipes(new SlowPipe()));
    Object.assign(work, { gate: gate(), pipe: gate(), ended: 0, calls: 0 });
    losses.length = 0;
    const count = () => semaphore({ client: store, limit: 1 }).count("nest-never-called");
    try {
      expect((await request(running.url).get("/never/invalid")).status).toBe(408);
      expect(await count()).toBe(1);
      work.pipe.open();
      // The pipe fails: Nest never calls the handler, and the interceptor cannot tell. The permit is held
      // until the grace is over, never given back early, and its return is reported as a loss.
      expect((await request(running.url).get("/never/b")).status).toBe(503);
      expect(losses).toEqual([]);
      await eventually(async () => (await count()) === 0);
      expect(losses).toEqual([expect.objectContaining({ code: "ERR_SEMAPHORE_LEASE_LOST" })]);
      expect((losses[0] as Error).message).toContain("could not see the handler's end");
      expect(work.calls).toBe(0);
    } finally {
      work.pipe.open();
    }
  });
});
