import type { FastifyInstance, FastifyPluginCallback, FastifyRequest } from "fastify";
import { DISCONNECT_GRACE_MS } from "../../src/options/defaults.js";
import { knownOptions, optionsObject, positiveMs } from "../../src/options/validate.js";
import { given, parseAdmissionOptions } from "../http/config.js";
import { SHARED_DEFAULTS } from "../http/lists.js";
import type { AdmissionOptions, SharedAdmissionOptions } from "../http/types.js";
import { hook } from "./hook.js";
import type { FastifyLockOptions, FastifyOnRejected, FastifySemaphoreOptions, LeaseholdHook } from "./types.js";

/**
 * Options of the {@link leasehold} plugin: the client, and defaults for every
 * hook made through `app.leasehold`.
 *
 * @example
 * ```ts
 * const options: LeaseholdPluginOptions = { client: redis, onStoreError: "fail-open", shutdownGraceMs: 10_000 };
 * ```
 */
export interface LeaseholdPluginOptions extends SharedAdmissionOptions<FastifyRequest, FastifyOnRejected> {}

/** The plugin options every hook takes as defaults. */
export const PLUGIN_DEFAULTS = SHARED_DEFAULTS;

const PLUGIN_OPTIONS = [...PLUGIN_DEFAULTS, "shutdownGraceMs"] as const;

/**
 * What the {@link leasehold} plugin decorates the app with (`app.leasehold`):
 * the `semaphore` and `lock` hooks, taking the plugin's options as defaults
 * and closed with the app.
 *
 * @example
 * ```ts
 * await app.register(leasehold, { client: redis });
 * app.post("/chat", { onRequest: app.leasehold.semaphore("openai", 20) }, handler);
 * ```
 */
export interface LeaseholdDecorator {
  /** A semaphore hook, as `semaphore` from `leasehold/fastify`, with the plugin's defaults. */
  semaphore(
    name: string,
    limit: number | ((request: FastifyRequest) => number),
    options?: FastifySemaphoreOptions,
  ): LeaseholdHook;
  /** A lock hook, as `lock` from `leasehold/fastify`, with the plugin's defaults. */
  lock(name: string, options?: FastifyLockOptions): LeaseholdHook;
}

declare module "fastify" {
  interface FastifyInstance {
    /** leasehold's hooks with shared defaults, once the {@link leasehold} plugin is registered. */
    leasehold: LeaseholdDecorator;
  }
}

const WHERE = "leasehold plugin";

/** The plugin's options checked, values included, at registration: the defaults every hook will take. */
function pluginDefaults(options: unknown): {
  defaults: AdmissionOptions<FastifyRequest, FastifyOnRejected>;
  graceMs: number;
} {
  const passed = optionsObject(options, WHERE) as LeaseholdPluginOptions;
  knownOptions(passed, PLUGIN_OPTIONS, WHERE);
  const defaults = given(passed, PLUGIN_DEFAULTS);
  // As a route would take them: a bad value fails the app's start, not the first route declared.
  parseAdmissionOptions({ kind: "lock", name: "plugin", options: defaults }, WHERE);
  const { shutdownGraceMs } = passed;
  const graceMs =
    shutdownGraceMs === undefined
      ? DISCONNECT_GRACE_MS
      : positiveMs(
          "shutdownGraceMs",
          shutdownGraceMs,
          "Pass how long requests in flight may finish when the app closes, e.g. shutdownGraceMs: 10000.",
        );
  return { defaults, graceMs };
}

function register(app: FastifyInstance, options: LeaseholdPluginOptions, done: (error?: Error) => void): void {
  let checked: ReturnType<typeof pluginDefaults>;
  try {
    checked = pluginDefaults(options);
  } catch (error) {
    done(error as Error);
    return;
  }
  const { defaults, graceMs } = checked;
  const hooks: LeaseholdHook[] = [];
  const made = (made: LeaseholdHook): LeaseholdHook => {
    hooks.push(made);
    return made;
  };
  const decorator: LeaseholdDecorator = {
    semaphore: (name, limit, routeOptions) =>
      made(hook({ kind: "semaphore", name, limit, options: routeOptions }, "semaphore hook", defaults)),
    lock: (name, routeOptions) => made(hook({ kind: "lock", name, options: routeOptions }, "lock hook", defaults)),
  };
  app.decorate("leasehold", decorator);
  // Before the server stops: requests in flight are told (their signal aborts) while later ones
  // are answered 503 shutting-down, and the app closes once their permits are back.
  app.addHook("preClose", async () => {
    await Promise.all(hooks.map((each) => each.close({ graceMs })));
  });
  done();
}

/**
 * Fastify plugin for shared defaults, after `@fastify/rate-limit`'s
 * conventions: `app.register(leasehold, { client })` decorates the app with
 * `app.leasehold.semaphore(...)` and `app.leasehold.lock(...)`, hooks that
 * take the plugin's options as defaults (a route's own options win), and
 * closes them when the app closes (`app.close()`: requests in flight are told
 * through `lease.signal`, for at most `shutdownGraceMs`). Not encapsulated:
 * registered once, the decorator is seen by every plugin of the app. The
 * plain `semaphore` and `lock` exports need no plugin.
 *
 * @example
 * ```ts
 * import Fastify from "fastify";
 * import { leasehold } from "leasehold/fastify";
 *
 * const app = Fastify();
 * await app.register(leasehold, { client: redis, shutdownGraceMs: 10_000 });
 * app.post("/chat", { onRequest: app.leasehold.semaphore("openai", 20) }, async (request) => {
 *   return callModel(request.body, { signal: request.lease?.signal });
 * });
 * ```
 */
export const leasehold: FastifyPluginCallback<LeaseholdPluginOptions> = Object.assign(register, {
  // What `fastify-plugin` sets: the decorator is the app's, not an encapsulated child's.
  [Symbol.for("skip-override")]: true,
  [Symbol.for("fastify.display-name")]: "leasehold",
});
