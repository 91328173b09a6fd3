import request from "supertest";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { lock as expressLock, semaphore as expressSemaphore } from "../../integrations/express/index.js";
import { lock as honoLock } from "../../integrations/hono/index.js";
import { Semaphore } from "../../integrations/nestjs/index.js";
import { lock, semaphore, ValidationError } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { eventually } from "../support/stores.js";
import { bothStores, harnesses } from "./frameworks.js";
import { Control, type RunningApp } from "./harness.js";

describe.each(harnesses)("$name adapter and the fence", (harness) => {
  describe.each(bothStores)("on the $name store", ({ make }) => {
    let store: Store;
    let app: RunningApp;

    beforeEach(async () => {
      store = make();
      app = await harness.start(store, new Control(store));
    });

    afterEach(async () => {
      await app.close();
    });

    it("the handler's lease has its fence; no Lease-Fence header unless asked", async () => {
      const res = await request(app.url).get("/unfenced");
      expect(res.status).toBe(200);
      expect(Number.isSafeInteger(res.body.fence) && res.body.fence > 0).toBe(true);
      expect(res.headers["lease-fence"]).toBeUndefined();
    });

    it.each(["/fenced", "/fenced-lock"])(
      "%s: Lease-Fence is the handler's fence, strictly increasing across sequential requests",
      async (path) => {
        // The client can read a response before the server's release (after its last byte) is done.
        const free =
          path === "/fenced"
            ? async () => (await semaphore({ client: store, limit: 2 }).stats("fenced")).used === 0
            : async () => !(await lock({ client: store }).stats("fenced-lock")).held;
        const fences: number[] = [];
        for (let n = 0; n < 5; n++) {
          const res = await request(app.url).get(path);
          expect(res.status).toBe(200);
          expect(res.headers["lease-fence"]).toMatch(/^[1-9]\d*$/);
          expect(Number(res.headers["lease-fence"])).toBe(res.body.fence);
          fences.push(res.body.fence);
          await eventually(free);
        }
        expect(fences.every((fence, n) => n === 0 || fence > (fences[n - 1] as number))).toBe(true);
      },
    );
  });
});

describe("exposeFence is validated like every other option", () => {
  it.each([
    ["Express", () => expressSemaphore("x", 1, { exposeFence: "yes" as never })],
    ["Express lock", () => expressLock("x", { exposeFence: 1 as never })],
    ["Hono", () => honoLock("x", { exposeFence: "true" as never })],
    ["NestJS", () => Semaphore("x", 1, { exposeFence: null as never })],
  ])("%s", (_, create) => {
    expect(create).toThrow(ValidationError);
    expect(create).toThrow(/`exposeFence` must be true or false/);
  });
});
