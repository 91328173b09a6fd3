import { storesUnderTest } from "../support/stores.js";
import { expressHarness } from "./express-app.js";
import { fastifyHarness } from "./fastify-app.js";
import type { Harness } from "./harness.js";
import { honoHarness, honoWrappedHarness } from "./hono-app.js";
import { nestHarness } from "./nest-app.js";

/** Every adapter, on every framework version and platform it supports. */
export const harnesses: Harness[] = [
  expressHarness(5),
  expressHarness(4),
  honoHarness,
  honoWrappedHarness,
  fastifyHarness,
  nestHarness("express"),
  nestHarness("fastify"),
];

/** The embedded store and Redis (through ioredis): what an adapter's behaviour is checked over. */
export const bothStores = storesUnderTest.filter((store) => store.name === "memory" || store.name === "ioredis");
