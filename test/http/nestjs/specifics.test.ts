import "reflect-metadata";
import { request as httpRequest } from "node:http";
import { Readable } from "node:stream";
import {
  type CanActivate,
  Controller,
  createParamDecorator,
  type ExecutionContext,
  Get,
  type INestApplication,
  Inject,
  Injectable,
  Module,
  type NestInterceptor,
  type PipeTransform,
  Res,
  Sse,
  StreamableFile,
  UseGuards,
  UseInterceptors,
} from "@nestjs/common";
import { HttpAdapterHost, NestFactory, Reflector } from "@nestjs/core";
import { ExpressAdapter } from "@nestjs/platform-express";
import { FastifyAdapter } from "@nestjs/platform-fastify";
import { interval, map, take } from "rxjs";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import type { RequestLease } from "../../../integrations/http/types.js";
import {
  Lease,
  LeaseholdGuard,
  LeaseholdModule,
  type LeaseholdModuleOptions,
  type LeaseholdOptionsFactory,
  LeaseRejectedException,
  Lock,
  type NestRequest,
  Semaphore,
} from "../../../integrations/nestjs/index.js";
import { memoryStore, semaphore, ValidationError } from "../../../src/index.js";
import type { Store } from "../../../src/store/index.js";
import { eventually, gate, spyStore } from "../../support/stores.js";
import type { RunningApp } from "../harness.js";
import { listenNest, Timeout } from "../nest-app.js";

const seen: { leaseInInterceptor?: boolean; leaseInPipe?: boolean } = {};

/** The request as a parameter, so a pipe can look at it. */
const WholeRequest = createParamDecorator((_data: unknown, context: ExecutionContext) => context.switchToHttp().getRequest());

/** A pipe that looks at the request: the guard must have run before it. */
@Injectable()
class SeesLeaseInPipe implements PipeTransform {
  transform(request: NestRequest) {
    seen.leaseInPipe = request.lease !== undefined;
    return request;
  }
}

@Injectable()
class SeesLease implements NestInterceptor {
  intercept(context: Parameters<NestInterceptor["intercept"]>[0], next: Parameters<NestInterceptor["intercept"]>[1]) {
    seen.leaseInInterceptor = context.switchToHttp().getRequest().lease !== undefined;
    return next.handle();
  }
}

/** Gates the handlers below wait on, one per route; the test opens them. */
const gates = { after: gate(), stuck: gate() };

/** A guard that runs after leasehold's (method level, below a class-level @Semaphore) and refuses. */
@Injectable()
class Refuses implements CanActivate {
  canActivate(): boolean {
    return false;
  }
}

@Controller("refused")
@Semaphore("refused", 1)
class RefusedController {
  @Get()
  @UseGuards(Refuses)
  never() {
    return "unreachable";
  }
}

@Controller("scoped")
@Semaphore("class-wide", 1)
class ScopedController {
  constructor(@Inject(HttpAdapterHost) private readonly host: HttpAdapterHost) {}

  @Get("after")
  @Semaphore("after", 1)
  async after(@Res() response: unknown) {
    // Answers first, through the platform's own response, then works on.
    this.host.httpAdapter.reply(response, { answered: true }, 200);
    await gates.after.opened;
  }

  @Get("stuck")
  @Semaphore("stuck", 1)
  async stuck() {
    await gates.stuck.opened;
    return "too late";
  }

  @Get("inherits")
  inherits(@Lease() lease: RequestLease) {
    return { key: lease.key };
  }

  @Get("overrides")
  @Semaphore("method-own", 3)
  @UseInterceptors(SeesLease)
  overrides(@Lease() lease: RequestLease & { limit: number }, @WholeRequest(SeesLeaseInPipe) _request: NestRequest) {
    return { key: lease.key, limit: lease.limit };
  }

  @Sse("events")
  @Semaphore("events", 1)
  events() {
    return interval(50).pipe(
      take(4),
      map((n) => ({ data: { n } })),
    );
  }
}

/** Handlers that outlive a timeout: each works until the test opens its gate, then counts its end. */
const slow = { gate: gate(), ended: 0 };
const slowWork = async () => {
  await slow.gate.opened;
  slow.ended++;
  return "too late";
};

@Controller("timeout")
class TimeoutController {
  // Leasehold's interceptor inside the timeout (its observable is unsubscribed)...
  @Get("inside")
  @Semaphore("timeout-inside", 1)
  @UseInterceptors(Timeout)
  inside() {
    return slowWork();
  }

  // ...outside it (its observable fails), with @Semaphore above @Get this time...
  @Semaphore("timeout-outside", 1)
  @UseInterceptors(Timeout)
  @Get("outside")
  outside() {
    return slowWork();
  }
}

/** A file whose stream fails after its first chunk (a disk error, a source that went away). */
@Controller("files")
class FilesController {
  @Get("broken")
  @Semaphore("broken-file", 1)
  broken() {
    return new StreamableFile(
      Readable.from(
        (async function* () {
          yield "first\n";
          await new Promise((resolve) => setTimeout(resolve, 20));
          throw new Error("disk gone");
        })(),
      ),
    );
  }
}

// ...and on a controller, under a controller-wide timeout.
@Controller("timeout-class")
@Semaphore("timeout-class", 1)
@UseInterceptors(Timeout)
class TimeoutClassController {
  @Get()
  handler() {
    return slowWork();
  }
}

describe.each(["express", "fastify"] as const)("NestJS specifics on %s", (platform) => {
  let app: INestApplication;
  let running: RunningApp;
  afterEach(async () => {
    await running?.close();
  });

  const start = async (imports: unknown[]) => {
    @Module({
      imports: imports as never[],
      controllers: [ScopedController, RefusedController, TimeoutController, TimeoutClassController, FilesController],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, platform === "express" ? new ExpressAdapter() : new FastifyAdapter(), {
      logger: false,
    });
    running = await listenNest(app);
  };

  it("a method decorator overrides its controller's, and a request is admitted once, before interceptors", async () => {
    const { store, calls } = spyStore(memoryStore());
    await start([LeaseholdModule.forRoot({ client: store })]);
    const inherits = await request(running.url).get("/scoped/inherits");
    expect(inherits.body).toEqual({ key: "class-wide" });
    const overrides = await request(running.url).get("/scoped/overrides");
    expect(overrides.body).toEqual({ key: "method-own", limit: 3 });
    expect(seen.leaseInInterceptor).toBe(true);
    expect(seen.leaseInPipe).toBe(true);
    // Class and method both install the guard; only one permit per request was taken.
    expect(calls.semaphoreAcquire).toBe(2);
    await eventually(() => calls.semaphoreRelease === 2);
  });

  it("a handler that answers first and works on keeps its permit until it returns", async () => {
    const { store, calls } = spyStore(memoryStore());
    await start([LeaseholdModule.forRoot({ client: store })]);
    gates.after = gate();
    const count = () => semaphore({ client: store, limit: 1 }).count("after");
    const answered = await request(running.url).get("/scoped/after");
    expect(answered.body).toEqual({ answered: true });
    // The response is complete, the handler is not: the permit stays taken.
    expect(await count()).toBe(1);
    expect((await request(running.url).get("/scoped/after")).status).toBe(503);
    gates.after.open();
    await eventually(async () => (await count()) === 0);
    await eventually(() => calls.semaphoreRelease === 1);
  });

  it("a guard after leasehold's that refuses: the interceptor never runs, the permit returns with the response", async () => {
    const { store, calls } = spyStore(memoryStore());
    await start([LeaseholdModule.forRoot({ client: store })]);
    expect((await request(running.url).get("/refused")).status).toBe(403);
    expect(calls.semaphoreAcquire).toBe(1);
    await eventually(() => calls.semaphoreRelease === 1);
    expect(await semaphore({ client: store, limit: 1 }).count("refused")).toBe(0);
  });

  // Regression: a timeout interceptor answered 408 and the permit went back while the handler's
  // promise still ran (the interceptor saw only its observable end): a second request was admitted
  // beside it, two at once under limit 1.
  it.each([
    ["/timeout/inside", "timeout-inside"],
    ["/timeout/outside", "timeout-outside"],
    ["/timeout-class", "timeout-class"],
  ])("%s: a handler that outlives a timeout() keeps its permit until it returns, then gives it back once", async (path, id) => {
    const { store, calls } = spyStore(memoryStore());
    await start([LeaseholdModule.forRoot({ client: store })]);
    slow.gate = gate();
    slow.ended = 0;
    const count = () => semaphore({ client: store, limit: 1 }).count(id);
    expect((await request(running.url).get(path)).status).toBe(408);
    // The handler is still at work: its permit is taken, and nobody else is admitted.
    expect(await count()).toBe(1);
    expect((await request(running.url).get(path)).status).toBe(503);
    expect(slow.ended).toBe(0);
    slow.gate.open();
    await eventually(() => slow.ended === 1);
    await eventually(async () => (await count()) === 0);
    expect(calls.semaphoreAcquire).toBe(2);
    await eventually(() => calls.semaphoreRelease === 1);
    const next = await request(running.url).get(path);
    expect(next.status).toBe(200);
    expect(next.text).toBe("too late");
  });

  it("a StreamableFile whose stream fails mid-way returns its permit, and no loss is reported", async () => {
    const { store, calls } = spyStore(memoryStore());
    const lost: unknown[] = [];
    await start([LeaseholdModule.forRoot({ client: store, onLeaseLost: (error) => lost.push(error) })]);
    const res = await new Promise<{ text: string; complete: boolean }>((resolve) => {
      let text = "";
      const req = httpRequest(`${running.url}/files/broken`, (response) => {
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => {
          text += chunk;
        });
        response.on("end", () => resolve({ text, complete: response.complete }));
        response.on("error", () => resolve({ text, complete: false }));
      });
      req.on("error", () => resolve({ text, complete: false }));
      req.end();
    });
    // The client sees a cut stream, never a complete-looking one.
    expect(res.complete).toBe(false);
    await eventually(async () => (await semaphore({ client: store, limit: 1 }).count("broken-file")) === 0);
    await eventually(() => calls.semaphoreRelease === 1);
    expect(lost).toEqual([]);
  });

  it("disconnectGraceMs can be a module default", async () => {
    const store = memoryStore();
    const lost: unknown[] = [];
    await start([LeaseholdModule.forRoot({ client: store, disconnectGraceMs: 150, onLeaseLost: (error) => lost.push(error) })]);
    gates.stuck = gate();
    const count = () => semaphore({ client: store, limit: 1 }).count("stuck");
    const cut = httpRequest(`${running.url}/scoped/stuck`);
    cut.on("error", () => {});
    cut.end();
    await eventually(async () => (await count()) === 1);
    cut.destroy();
    await eventually(async () => (await count()) === 0);
    expect(lost).toHaveLength(1);
    gates.stuck.open();
  });

  it("exposeFence can be a module default", async () => {
    const store = memoryStore();
    await start([LeaseholdModule.forRoot({ client: store, exposeFence: true })]);
    const res = await request(running.url).get("/scoped/inherits");
    expect(res.body).toEqual({ key: "class-wide" });
    expect(res.headers["lease-fence"]).toMatch(/^[1-9]\d*$/);
  });

  it("forRootAsync makes the options with a class it instantiates (useClass) or one another module provides (useExisting)", async () => {
    const { store, calls } = spyStore(memoryStore());
    const STORE = Symbol("store");
    @Injectable()
    class LeaseholdConfig implements LeaseholdOptionsFactory {
      static made = 0;
      constructor(@Inject(STORE) private readonly client: Store) {
        LeaseholdConfig.made++;
      }
      createLeaseholdOptions(): LeaseholdModuleOptions {
        return { client: this.client };
      }
    }
    @Module({ providers: [{ provide: STORE, useValue: store }, LeaseholdConfig], exports: [STORE, LeaseholdConfig] })
    class ConfigModule {}

    for (const made of [
      LeaseholdModule.forRootAsync({ imports: [ConfigModule], useClass: LeaseholdConfig }),
      LeaseholdModule.forRootAsync({ imports: [ConfigModule], useExisting: LeaseholdConfig }),
    ]) {
      const before = calls.semaphoreAcquire;
      await start([made]);
      const res = await request(running.url).get("/scoped/inherits");
      expect(res.body).toEqual({ key: "class-wide" });
      expect(calls.semaphoreAcquire).toBe(before + 1);
      await running.close();
    }
    // useClass made its own; useExisting reused the one ConfigModule had made.
    expect(LeaseholdConfig.made).toBe(3);
  });

  it("an SSE stream keeps its permit until the last event", async () => {
    const store = memoryStore();
    await start([LeaseholdModule.forRootAsync({ useFactory: async () => ({ client: store }) })]);
    const count = () => semaphore({ client: store, limit: 1 }).count("events");
    const stream = request(running.url).get("/scoped/events").buffer(true);
    const whole = stream.then((res) => res);
    await eventually(async () => (await count()) === 1);
    const refused = await request(running.url).get("/scoped/events");
    expect(refused.status).toBe(503);
    const res = await whole;
    expect(res.text.match(/data:/g)).toHaveLength(4);
    await eventually(async () => (await count()) === 0);
  });
});

describe("NestJS guard outside HTTP", () => {
  it("passes non-HTTP contexts through without taking a lease", async () => {
    const { store, calls } = spyStore(memoryStore());
    const guard = new LeaseholdGuard(new Reflector(), {} as never, { client: store });
    const rpc = { getType: () => "rpc", getHandler: () => ScopedController.prototype.inherits, getClass: () => ScopedController };
    expect(await guard.canActivate(rpc as never)).toBe(true);
    expect(calls.semaphoreAcquire).toBe(0);
  });

  it("refusals are HttpExceptions carrying the problem body", () => {
    const error = new LeaseRejectedException({
      reason: "full",
      status: 503,
      retryAfter: 2,
      headers: {},
      problem: { type: "urn:x", title: "t", status: 503, detail: "d", key: "k", limit: 1, retryAfter: 2 },
      error: new Error("full"),
    });
    expect(error.getStatus()).toBe(503);
    expect(error.getResponse()).toMatchObject({ key: "k" });
  });

  it("a module prefix with a colon is refused when the module is configured, not on the first request", async () => {
    expect(() => LeaseholdModule.forRoot({ prefix: "app:locks" })).toThrow(ValidationError);
    @Module({
      imports: [LeaseholdModule.forRootAsync({ useFactory: async () => ({ client: memoryStore(), prefix: "app:locks" }) })],
      controllers: [ScopedController],
    })
    class AppModule {}
    const created = NestFactory.create(AppModule, new ExpressAdapter(), { logger: false, abortOnError: false });
    await expect(created).rejects.toThrow(/must not contain ":"/);
  });

  it("a bad shutdownGraceMs is refused when the module is configured, naming it", () => {
    for (const shutdownGraceMs of [-1, 1.5, 2 ** 31, "5s"]) {
      expect(() => LeaseholdModule.forRoot({ shutdownGraceMs } as never)).toThrow(/`shutdownGraceMs` must be a whole number/);
    }
    expect(() => LeaseholdModule.forRoot({ shutdownGraceMs: 0 })).not.toThrow();
  });

  it("module options are checked when the module is configured: a bad value or an unknown option", async () => {
    const cases: [LeaseholdModuleOptions, RegExp][] = [
      [{ exposeFence: "yes" as never }, /`exposeFence` must be true or false/],
      [{ disconnectGraceMs: 0 }, /`disconnectGraceMs` must be a whole number/],
      [{ onStoreError: "open" as never }, /"fail-closed" or "fail-open"/],
      [{ waitMs: 100 } as never, /unknown option `waitMs` for LeaseholdModule options/],
    ];
    for (const [options, message] of cases) {
      expect(() => LeaseholdModule.forRoot(options)).toThrow(ValidationError);
      expect(() => LeaseholdModule.forRoot(options)).toThrow(message);
    }
    @Module({
      imports: [LeaseholdModule.forRootAsync({ useFactory: async () => ({ client: memoryStore(), exposeFence: 1 as never }) })],
      controllers: [ScopedController],
    })
    class AppModule {}
    const created = NestFactory.create(AppModule, new ExpressAdapter(), { logger: false, abortOnError: false });
    await expect(created).rejects.toThrow(/`exposeFence` must be true or false/);
  });

  it("forRootAsync takes exactly one of useFactory, useClass and useExisting", () => {
    class Options implements LeaseholdOptionsFactory {
      createLeaseholdOptions(): LeaseholdModuleOptions {
        return {};
      }
    }
    expect(() => LeaseholdModule.forRootAsync({})).toThrow(ValidationError);
    expect(() => LeaseholdModule.forRootAsync({ useFactory: () => ({}), useClass: Options })).toThrow(
      /exactly one of useFactory, useClass or useExisting, got 2/,
    );
  });

  it("bad decorator options throw when the class is defined, not on the first request", () => {
    expect(() => Semaphore("x", 0)).toThrow(ValidationError);
    expect(() => Semaphore("", 1)).toThrow(/lease name/);
    expect(() => Semaphore("x", 1, { bogus: 1 } as never)).toThrow(/unknown option `bogus`/);
    expect(() => Semaphore("x", 1, { status: 200 })).toThrow(/status/);
    const key = (req: NestRequest) => req.params.id;
    expect(() => Semaphore("x", 1, { key, leaseMs: 1000, heartbeatMs: 900 })).toThrow(/heartbeatMs/);
    expect(() => Semaphore("x", 1, { waitMs: 2 ** 31 })).toThrow(/`waitMs` must be a whole number/);
    expect(() => Lock("x", { retries: 1, retryDelayMs: 2 ** 31 })).toThrow(/`retryDelayMs` must be a whole number/);
    expect(() => Lock("x", { prefix: "app:locks" })).toThrow(/must not contain ":"/);
    expect(() => Semaphore("x", 1, { disconnectGraceMs: 0 })).toThrow(
      /`disconnectGraceMs` must be a whole number of milliseconds/,
    );
  });
});
