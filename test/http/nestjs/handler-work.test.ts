// The NestJS handler's promise is found through a hidden parameter, not an AsyncLocalStorage (whose first
// `run` turns on promise hooks for the whole process on Node 20): the handler still sees exactly its own
// arguments, a global pipe on every parameter does not lose the tracking, and no AsyncLocalStorage runs.
import "reflect-metadata";
import { AsyncLocalStorage } from "node:async_hooks";
import { Controller, Get, Injectable, Param, type PipeTransform, UseInterceptors } from "@nestjs/common";
import request from "supertest";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Lease, Semaphore, type SemaphoreLease } from "../../../integrations/nestjs/index.js";
import { memoryStore, semaphore } from "../../../src/index.js";
import { eventually, gate } from "../../support/stores.js";
import type { RunningApp } from "../harness.js";
import { listenNestWith, Timeout } from "../nest-app.js";

/** A global pipe that rewrites every string parameter: it runs on the hidden one too. */
@Injectable()
class Shout implements PipeTransform {
  transform(value: unknown) {
    return typeof value === "string" ? value.toUpperCase() : value;
  }
}

const work = { gate: gate(), ended: 0, args: [] as unknown[] };

@Controller("work")
class WorkController {
  @Get(":id")
  @Semaphore("handler-work", 1)
  @UseInterceptors(Timeout)
  async slow(@Param("id") id: string, @Lease() lease: SemaphoreLease) {
    // biome-ignore lint/complexity/noArguments: what Nest passed, hidden parameter included or not
    work.args = [...arguments];
    await work.gate.opened;
    work.ended++;
    return `${id} ${lease.limit}`;
  }
}

describe("NestJS: the handler's work without AsyncLocalStorage", () => {
  let running: RunningApp;
  afterEach(async () => {
    vi.restoreAllMocks();
    await running?.close();
  });

  it("a handler with parameters under a global pipe sees only its own, and keeps its permit past a timeout()", async () => {
    const run = vi.spyOn(AsyncLocalStorage.prototype, "run");
    const enter = vi.spyOn(AsyncLocalStorage.prototype, "enterWith");
    const store = memoryStore();
    running = await listenNestWith([WorkController], store, (app) => app.useGlobalPipes(new Shout()));
    work.gate = gate();
    work.ended = 0;
    const count = () => semaphore({ client: store, limit: 1 }).count("handler-work");

    expect((await request(running.url).get("/work/a")).status).toBe(408);
    expect(work.args).toHaveLength(2);
    expect(work.args[0]).toBe("A");
    // Still at work after the timeout answered: the permit is held, the next request refused.
    expect(await count()).toBe(1);
    expect((await request(running.url).get("/work/b")).status).toBe(503);
    work.gate.open();
    await eventually(() => work.ended === 1);
    await eventually(async () => (await count()) === 0);
    expect(run).not.toHaveBeenCalled();
    expect(enter).not.toHaveBeenCalled();
  });

  it("called directly, a tracked handler is the handler", async () => {
    work.gate = gate();
    work.gate.open();
    const controller = new WorkController();
    const lease = { limit: 7 } as SemaphoreLease;
    await expect(controller.slow("x", lease)).resolves.toBe("x 7");
    expect(work.args).toEqual(["x", lease]);
  });
});
