// The apps the adapter model sends its requests to (see adapter.test.ts): one guarded route, `/m`,
// written the way each framework's users write it, whose handler follows its request's plan.
import "reflect-metadata";
import { createServer, type Server } from "node:http";
import { Readable } from "node:stream";
import { createAdaptorServer } from "@hono/node-server";
import {
  type ArgumentsHost,
  Catch,
  Controller,
  type ExceptionFilter,
  Get,
  HttpException,
  Inject,
  Module,
  Req,
  StreamableFile,
} from "@nestjs/common";
import { APP_FILTER, HttpAdapterHost, NestFactory } from "@nestjs/core";
import { ExpressAdapter } from "@nestjs/platform-express";
import express from "express";
import { type Context, type Handler, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { stream, streamSSE, streamText } from "hono/streaming";
import { timeout } from "hono/timeout";
import { semaphore as expressSemaphore } from "../../integrations/express/index.js";
import { semaphore as honoSemaphore } from "../../integrations/hono/index.js";
import type { RequestLease } from "../../integrations/http/types.js";
import { Lease, LeaseholdModule, type NestRequest, Semaphore } from "../../integrations/nestjs/index.js";
import type { Store } from "../../src/store/index.js";
import { listen } from "../http/harness.js";
import { listenNest } from "../http/nest-app.js";
import type { AdapterMonitor } from "./adapter-monitor.js";
import {
  CLOSE_GRACE_MS,
  GRACE_MS,
  HEARTBEAT_MS,
  LEASE_MS,
  type Program,
  type RequestPlan,
  TIMEOUT_MS,
} from "./adapter-program.js";

/** The error a plan's handler throws on purpose: the app's, answered 500 by its error handling. */
export const USER_FAILURE = "user failure";

export interface ModelApp {
  url: string;
  /** The guard shuts down (`close()`; Nest: the app closes). */
  shutdown(): Promise<void>;
  /** Stops serving, once the program is over. */
  stop(): Promise<void>;
}

/** Works `ms`; one that honours its signal stops when it aborts, rejecting with its reason. */
function work(ms: number, lease: RequestLease, honours: boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const signal = lease.signal;
    if (honours && signal.aborted) {
      reject(signal.reason);
      return;
    }
    const stop = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      if (honours) signal.removeEventListener("abort", stop);
      resolve();
    }, ms);
    if (honours) signal.addEventListener("abort", stop, { once: true });
  });
}

/**
 * A plan's handler, whatever the framework: the part before the answer (its work, an early
 * release, a failure before the response started), counted as the handler working from its entry.
 * Returns with the handler still counted: the caller answers, then calls `monitor.exit`.
 */
async function before(monitor: AdapterMonitor, req: number, plan: RequestPlan, lease: RequestLease | undefined): Promise<void> {
  monitor.enter(req, lease?.token, "handler");
  if (lease === undefined) return;
  if (plan.release === "start") {
    monitor.selfRelease(req);
    await lease.release();
  }
  await work(plan.workMs, lease, plan.honours);
  if (plan.release === "middle") {
    monitor.selfRelease(req);
    await lease.release();
  }
  if (plan.fails === "before") throw new Error(USER_FAILURE);
}

/** A stream's part after its first chunk: more work, maybe a failure. */
async function after(plan: RequestPlan, lease: RequestLease): Promise<void> {
  await work(plan.streamMs, lease, plan.honours);
  if (plan.fails === "after") throw new Error(USER_FAILURE);
}

interface Shared {
  program: Program;
  monitor: AdapterMonitor;
  store: Store;
  name: string;
}

const routeOptions = (store: Store) => ({
  client: store,
  disconnectGraceMs: GRACE_MS,
  leaseMs: LEASE_MS,
  heartbeatMs: HEARTBEAT_MS,
});

async function expressApp({ program, monitor, store, name }: Shared): Promise<ModelApp> {
  const app = express();
  const guard = expressSemaphore(name, program.limit, routeOptions(store));
  // No error handler of the app's own: Express's final handler answers the plan's failures 500.
  app.get("/m", guard, async (request, res) => {
    const req = Number(request.get("x-req"));
    const plan = program.requests[req] as RequestPlan;
    const lease = request.lease;
    // Counted until it ends its response or its failure is passed on: the end of its work for Express.
    let working = true;
    const done = () => {
      if (working) monitor.exit(req, "handler");
      working = false;
    };
    try {
      await before(monitor, req, plan, lease);
      if (plan.shape === "plain") {
        done();
        res.json({ ok: true });
        return;
      }
      res.write("first\n");
      await after(plan, lease as RequestLease);
      done();
      res.end("rest\n");
    } catch (error) {
      done();
      throw error;
    }
  });
  const running = await listen(createServer(app));
  return { url: running.url, shutdown: () => guard.close({ graceMs: CLOSE_GRACE_MS }), stop: () => running.close() };
}

async function honoApp({ program, monitor, store, name }: Shared): Promise<ModelApp> {
  const app = new Hono();
  const guard = honoSemaphore(name, program.limit, routeOptions(store));
  const ignore = async () => {};
  const handler: Handler = async (c: Context) => {
    const req = Number(c.req.header("x-req"));
    const plan = program.requests[req] as RequestPlan;
    const lease = c.get("lease") as RequestLease | undefined;
    // Behind a timeout(), a handler still working when it fires, or failing, ends out of the guard's sight.
    const behindTimeout = program.form === "hono-timeout";
    let working = true;
    const timer = behindTimeout ? setTimeout(() => working && monitor.unseen(req), TIMEOUT_MS - 20) : undefined;
    try {
      await before(monitor, req, plan, lease);
    } catch (error) {
      if (behindTimeout) monitor.unseen(req);
      monitor.exit(req, "handler");
      throw error;
    } finally {
      working = false;
      clearTimeout(timer);
    }
    if (plan.shape === "plain") {
      monitor.exit(req, "handler");
      return c.json({ ok: true });
    }
    const callback = async (write: (text: string) => Promise<unknown>) => {
      monitor.enter(req, lease?.token, "stream callback");
      try {
        await write("first\n");
        await after(plan, lease as RequestLease);
        await write("rest\n");
      } finally {
        monitor.exit(req, "stream callback");
      }
    };
    let response: Response;
    if (plan.helper === "stream") response = stream(c, (s) => callback((text) => s.write(text)), ignore);
    else if (plan.helper === "streamText") response = streamText(c, (s) => callback((text) => s.write(text)), ignore);
    else response = streamSSE(c, (s) => callback((text) => s.writeSSE({ data: text })), ignore);
    monitor.exit(req, "handler");
    return response;
  };
  if (program.form === "hono-wrap") app.get("/m", guard.wrap(handler));
  else if (program.form === "hono-timeout") app.get("/m", guard, timeout(TIMEOUT_MS), handler);
  else app.get("/m", guard, handler);
  // An app's error handler as the Hono docs show it: HTTPExceptions as they are, anything else a 500.
  app.onError((error, c) => {
    if (error instanceof HTTPException) return error.getResponse();
    return c.json({ error: error.name, message: error.message }, 500);
  });
  const running = await listen(createAdaptorServer({ fetch: app.fetch }) as Server);
  return { url: running.url, shutdown: () => guard.close({ graceMs: CLOSE_GRACE_MS }), stop: () => running.close() };
}

async function nestApp({ program, monitor, store, name }: Shared): Promise<ModelApp> {
  @Controller()
  class ModelController {
    @Get("m")
    @Semaphore(name, program.limit, { disconnectGraceMs: GRACE_MS, leaseMs: LEASE_MS, heartbeatMs: HEARTBEAT_MS })
    async m(@Req() request: NestRequest, @Lease() lease: RequestLease) {
      const req = Number(request.headers["x-req"]);
      const plan = program.requests[req] as RequestPlan;
      try {
        await before(monitor, req, plan, lease);
      } catch (error) {
        monitor.exit(req, "handler");
        throw error;
      }
      if (plan.shape === "plain") {
        monitor.exit(req, "handler");
        return { ok: true };
      }
      const body = async function* () {
        monitor.enter(req, lease.token, "stream body");
        try {
          yield "first\n";
          await after(plan, lease);
          yield "rest\n";
        } finally {
          monitor.exit(req, "stream body");
        }
      };
      monitor.exit(req, "handler");
      return new StreamableFile(Readable.from(body()));
    }
  }

  /** The app's own filter: HttpExceptions as they are, anything else a 500 with its message. */
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
    imports: [LeaseholdModule.forRoot({ client: store, shutdownGraceMs: CLOSE_GRACE_MS })],
    controllers: [ModelController],
    providers: [{ provide: APP_FILTER, useClass: ErrorsFilter }],
  })
  class ModelModule {}

  const app = await NestFactory.create(ModelModule, new ExpressAdapter(), { logger: false });
  const running = await listenNest(app);
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= app.close();
    return closing;
  };
  return { url: running.url, shutdown: close, stop: close };
}

/** Starts the program's app over `store`, guarding `/m` with the semaphore `name`. */
export function startApp(shared: Shared): Promise<ModelApp> {
  switch (shared.program.form) {
    case "express":
      return expressApp(shared);
    case "nest":
      return nestApp(shared);
    default:
      return honoApp(shared);
  }
}
