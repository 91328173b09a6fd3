// A regression: a retry() interceptor outside leasehold's (a global one) subscribes
// to leasehold's interceptor again when the handler fails, and Nest calls the handler again. The first
// call's end had already told the exchange the work was over: when an outer timeout() then answered
// the request, the permit went back while the second call still ran, and the next request was
// admitted under limit 1. Each subscription now reports its own work; one made after the permit is
// back fails instead of calling the handler without one.
import "reflect-metadata";
import { Controller, Get, Param } from "@nestjs/common";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { Semaphore } from "../../../integrations/nestjs/index.js";
import { memoryStore, semaphore } from "../../../src/index.js";
import { eventually, gate } from "../../support/stores.js";
import type { RunningApp } from "../harness.js";
import { listenNestWith, RetryOnce, Timeout } from "../nest-app.js";

const work = { gate: gate(), ended: 0, calls: 0 };

@Controller("outer")
class OuterRetryController {
  @Get(":id")
  @Semaphore("nest-outer-retry", 1)
  async flaky(@Param("id") id: string) {
    if (++work.calls === 1) throw new Error("first call fails");
    await work.gate.opened;
    work.ended++;
    return id;
  }
}

describe("a retry() interceptor outside leasehold's (NestJS)", () => {
  let running: RunningApp | undefined;
  afterEach(async () => {
    work.gate.open();
    await running?.close();
  });

  it("keeps the permit while the handler called again still runs past an outer timeout()", async () => {
    const store = memoryStore();
    // Global interceptors wrap the route's: the timeout outermost, then the retry, then leasehold's.
    running = await listenNestWith([OuterRetryController], store, (app) =>
      app.useGlobalInterceptors(new Timeout(), new RetryOnce()),
    );
    work.gate = gate();
    const count = () => semaphore({ client: store, limit: 1 }).count("nest-outer-retry");

    expect((await request(running.url).get("/outer/a")).status).toBe(408);
    expect(work.calls).toBe(2);
    // The second call is still at work: its permit is held, and the next request is refused.
    expect(work.ended).toBe(0);
    expect(await count()).toBe(1);
    expect((await request(running.url).get("/outer/b")).status).toBe(503);
    work.gate.open();
    await eventually(() => work.ended >= 1);
    await eventually(async () => (await count()) === 0);
  });
});
