import "reflect-metadata";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import {
  type ArgumentsHost,
  type CallHandler,
  type CanActivate,
  Catch,
  Controller,
  type ExceptionFilter,
  type ExecutionContext,
  Get,
  HttpCode,
  HttpException,
  type INestApplication,
  Inject,
  Injectable,
  Module,
  type NestInterceptor,
  Post,
  Req,
  RequestTimeoutException,
  StreamableFile,
  type Type,
  UseGuards,
} from "@nestjs/common";
import { APP_FILTER, HttpAdapterHost, NestFactory } from "@nestjs/core";
import { ExpressAdapter } from "@nestjs/platform-express";
import { FastifyAdapter } from "@nestjs/platform-fastify";
import { catchError, retry, TimeoutError, throwError, timeout } from "rxjs";
import type { RequestLease } from "../../integrations/http/types.js";
import { Lease, LeaseholdModule, Lock, type NestRequest, Semaphore } from "../../integrations/nestjs/index.js";
import type { Store } from "../../src/store/index.js";
import { type Control, connectionsOf, type Harness, type RunningApp } from "./harness.js";

const header = (req: NestRequest, name: string): string => {
  const value = req.headers[name];
  return typeof value === "string" ? value : "";
};
const tenant = (req: NestRequest) => header(req, "x-tenant");
const idOf = (req: NestRequest) => header(req, "x-id") || "anonymous";
const waitForAbort = (lease: RequestLease) =>
  new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));

/** The same routes as express-app.ts, written the NestJS way, for one store and one control. */
export function buildNestModule(control: Control, options: Record<string, unknown> = {}) {
  const hold = async (req: NestRequest, lease: RequestLease | undefined) => {
    control.watch(idOf(req), lease);
    await control.hold(idOf(req));
    return { key: lease?.key, limit: lease && "limit" in lease ? lease.limit : null };
  };
  const onLeaseLost = (error: unknown, req: NestRequest) => control.reasons.set(`hook:${String(req.url).slice(1)}`, error);
  const recordLoss = (error: unknown, req: NestRequest) => control.leaseLost(idOf(req), error);
  const body = async function* (lines: () => AsyncGenerator<string>) {
    yield* lines();
  };

  // Tenants sharing one id (tenants.test.ts), and the fence (fencing.test.ts). The view holds
  // when the request names an x-id, and answers what the handler's lease shows.
  const view = async (req: NestRequest, lease: RequestLease | undefined) => {
    if (header(req, "x-id") !== "") await control.hold(idOf(req));
    return {
      key: lease?.key,
      limit: lease && "limit" in lease ? lease.limit : null,
      tenant: lease && "tenant" in lease ? (lease.tenant ?? null) : null,
      fence: lease?.fence,
    };
  };
  const caps: Record<string, number> = { premium: 2, greedy: 4, broken: 0 };

  /** A slow guard that runs before leasehold's (an auth call): the client may leave meanwhile. */
  @Injectable()
  class SlowGuard implements CanActivate {
    async canActivate(context: ExecutionContext) {
      await control.hold(`before:${idOf(context.switchToHttp().getRequest())}`);
      return true;
    }
  }

  @Controller()
  class RoutesController {
    @Get("work")
    @Semaphore("work", 2, { key: tenant })
    work(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return hold(req, lease);
    }

    @Get("work-too")
    @Semaphore("work", 2, { key: tenant })
    workToo(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return hold(req, lease);
    }

    @Post("orders/:id")
    @HttpCode(200)
    @Lock("order", { key: (req) => String(req.params.id) })
    order(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return hold(req, lease);
    }

    @Get("quota")
    @Semaphore("quota", 1, { status: 429 })
    quota(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return hold(req, lease);
    }

    @Get("custom")
    @Semaphore("custom", 1, {
      onRejected: (rejection) => new HttpException({ custom: "refusal", retryAfter: rejection.retryAfter }, 418),
    })
    custom(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return hold(req, lease);
    }

    @Get("stream")
    @Semaphore("stream", 1)
    stream(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      control.watch(idOf(req), lease);
      return new StreamableFile(
        Readable.from(
          body(async function* () {
            yield "first\n";
            await control.hold(idOf(req));
            yield "second\n";
          }),
        ),
      );
    }

    @Get("throw")
    @Semaphore("throw", 1)
    throws() {
      throw new Error("handler failed");
    }

    @Get("reject")
    @Semaphore("reject", 1)
    async rejects() {
      await Promise.resolve();
      throw new Error("handler rejected");
    }

    @Get("lose")
    @Semaphore("lose", 1, { heartbeatMs: 20, onLeaseLost })
    async lose(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      control.watch(idOf(req), lease);
      await control.steal(lease);
      await waitForAbort(lease);
      throw lease.signal.reason;
    }

    @Get("lose-stream")
    @Semaphore("lose-stream", 1, { heartbeatMs: 20 })
    loseStream(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      control.watch(idOf(req), lease);
      return new StreamableFile(
        Readable.from(
          body(async function* () {
            yield "first\n";
            await control.steal(lease);
            await waitForAbort(lease);
          }),
        ),
      );
    }

    // Disconnects: a handler that keeps working after the abort until the test lets it finish,
    // one that ignores the abort and never ends, and one that gives its permit back early.
    @Get("linger")
    @Semaphore("linger", 1, { disconnectGraceMs: 60_000, onLeaseLost: recordLoss })
    linger(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return hold(req, lease);
    }

    @Get("abandon")
    @Semaphore("abandon", 1, { disconnectGraceMs: 200, onLeaseLost: recordLoss })
    async abandon(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      control.watch(idOf(req), lease);
      await control.hold(idOf(req));
      return "too late";
    }

    @Get("early")
    @Semaphore("early", 1, { leaseMs: 200, heartbeatMs: 50, onLeaseLost: recordLoss })
    async early(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      control.watch(idOf(req), lease);
      const released = await lease.release();
      await control.hold(idOf(req));
      return { released };
    }

    @Get("late")
    @Semaphore("late", 1)
    // Below @Semaphore, so applied first: its guard runs before leasehold's.
    @UseGuards(SlowGuard)
    late(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return hold(req, lease);
    }

    @Get("empty-key")
    @Semaphore("ek", 1, { key: () => "" })
    emptyKey() {
      return "unreachable";
    }

    @Get("throwing-key")
    @Semaphore("tk", 1, {
      key: () => {
        throw new Error("no tenant header");
      },
    })
    throwingKey() {
      return "unreachable";
    }

    @Get("skip")
    @Semaphore("skip", 1, { skip: (req) => header(req, "x-skip") === "1" })
    skip(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return hold(req, lease);
    }

    @Get("tenant-limit")
    @Semaphore("tl", (req) => (tenant(req) === "big" ? 2 : 1), { key: tenant })
    tenantLimit(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return hold(req, lease);
    }

    @Get("queue")
    @Semaphore("queue", 1, { waitMs: 10_000, maxQueue: 1 })
    async queue(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      control.watch(idOf(req), lease);
      await control.hold(idOf(req));
      return { waitedMs: lease.waitedMs };
    }

    @Get("spin")
    @Semaphore("spin", 1, { retries: 200, retryDelayMs: 10 })
    spin(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return hold(req, lease);
    }

    @Get("tenants")
    @Semaphore("tenants", 3, { tenant, tenantLimit: 2, exposeFence: true })
    tenants(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return view(req, lease);
    }

    @Get("tenants-premium")
    @Semaphore("premium", 3, { tenant, tenantLimit: (t) => caps[t] ?? 1 })
    premium(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return view(req, lease);
    }

    @Get("tenants-status")
    @Semaphore("tenants-status", 2, { tenant, tenantLimit: 1, status: 503 })
    tenantsStatus(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return view(req, lease);
    }

    @Get("tenants-optional")
    @Semaphore("optional", 2, { tenant: (req) => header(req, "x-tenant") || undefined, tenantLimit: 1 })
    tenantsOptional(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return view(req, lease);
    }

    @Get("tenants-queue")
    @Semaphore("tenants-queue", 1, { tenant, tenantLimit: 1, waitMs: 10_000 })
    tenantsQueue(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return view(req, lease);
    }

    @Get("fenced")
    @Semaphore("fenced", 2, { exposeFence: true })
    fenced(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return view(req, lease);
    }

    @Get("fenced-lock")
    @Lock("fenced-lock", { exposeFence: true })
    fencedLock(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return view(req, lease);
    }

    @Get("unfenced")
    @Semaphore("unfenced", 2)
    unfenced(@Req() req: NestRequest, @Lease() lease: RequestLease) {
      return view(req, lease);
    }

    @Get("open")
    @Semaphore("open", 1, { onStoreError: "fail-open", onStoreUnavailable: (error) => control.reasons.set("store", error) })
    open(@Lease() lease: RequestLease | undefined) {
      return { lease: lease !== undefined };
    }
  }

  /** Mirrors the other harnesses' error handler: HttpExceptions as they are, anything else as 500 with its message. */
  @Catch()
  class ErrorsFilter implements ExceptionFilter {
    constructor(@Inject(HttpAdapterHost) private readonly host: HttpAdapterHost) {}

    catch(error: Error, context: ArgumentsHost) {
      const response = context.switchToHttp().getResponse();
      const adapter = this.host.httpAdapter;
      if (adapter.isHeadersSent(response)) return;
      if (error instanceof HttpException) adapter.reply(response, error.getResponse(), error.getStatus());
      else adapter.reply(response, { error: error.name, message: error.message }, 500);
    }
  }

  @Module({
    imports: [LeaseholdModule.forRoot(options)],
    controllers: [RoutesController],
    providers: [{ provide: APP_FILTER, useClass: ErrorsFilter }],
  })
  class AppModule {}

  return AppModule;
}

/**
 * An Express-based Nest app of `controllers` with leasehold on `store`, set up by `configure` (global
 * pipes or interceptors) before it listens.
 */
export async function listenNestWith(
  controllers: Type[],
  store: Store,
  configure: (app: INestApplication) => void,
): Promise<RunningApp> {
  @Module({ imports: [LeaseholdModule.forRoot({ client: store })], controllers })
  class AppModule {}
  const app = await NestFactory.create(AppModule, new ExpressAdapter(), { logger: false });
  configure(app);
  return listenNest(app);
}

export async function listenNest(app: INestApplication): Promise<RunningApp> {
  await app.listen(0, "127.0.0.1");
  const server = app.getHttpServer() as Server;
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    connections: connectionsOf(server),
    close: async () => {
      server.closeAllConnections?.();
      await app.close();
    },
  };
}

export function nestHarness(platform: "express" | "fastify"): Harness {
  return {
    name: `NestJS (${platform})`,
    async start(store: Store, control: Control) {
      const adapter = platform === "express" ? new ExpressAdapter() : new FastifyAdapter();
      const app = await NestFactory.create(buildNestModule(control, { client: store }), adapter, { logger: false });
      return listenNest(app);
    },
  };
}

/** The timeout interceptor Nest's documentation shows: the handler's observable fails after 100 ms (a 408). */
@Injectable()
export class Timeout implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(
      timeout(100),
      catchError((error) => throwError(() => (error instanceof TimeoutError ? new RequestTimeoutException() : error))),
    );
  }
}

/** Calls the handler again when it fails (rxjs `retry`): a second call for the same request. */
@Injectable()
export class RetryOnce implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(retry(1));
  }
}
