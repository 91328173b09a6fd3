// The adapter model (issue #27): see the header comment written below once the model is checked.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import fc from "fast-check";
import { afterAll, beforeAll, describe, it } from "vitest";
import { type AcquiredEvent, CHANNELS, type LostEvent, type ReleasedEvent } from "../../src/index.js";
import { bothStores } from "../http/frameworks.js";
import { describeProgram, FORMS, type Form, programArbitrary } from "./adapter-program.js";
import { AdapterWorld } from "./adapter-world.js";

const RUNS = Number(process.env.ADAPTER_MODEL_RUNS ?? 3);
const SEED = process.env.MODEL_SEED === undefined ? undefined : Number(process.env.MODEL_SEED);
const PATH = process.env.MODEL_PATH;
const SHRINK = process.env.MODEL_SHRINK !== undefined;

let current: AdapterWorld | undefined;
const ours = (event: { id: string }) => current !== undefined && event.id === current.name;
const onAcquired = (message: unknown) => {
  const event = message as AcquiredEvent;
  if (ours(event)) current?.monitor.acquired(event.token);
};
const onReleased = (message: unknown) => {
  const event = message as ReleasedEvent;
  if (ours(event)) current?.monitor.released(event.token, event.ours);
};
const onLost = (message: unknown) => {
  const event = message as LostEvent;
  if (ours(event)) current?.monitor.lost(event.token, event.error);
};

beforeAll(() => {
  subscribe(CHANNELS.acquired, onAcquired);
  subscribe(CHANNELS.released, onReleased);
  subscribe(CHANNELS.lost, onLost);
});

afterAll(() => {
  unsubscribe(CHANNELS.acquired, onAcquired);
  unsubscribe(CHANNELS.released, onReleased);
  unsubscribe(CHANNELS.lost, onLost);
});

async function programs(form: Form, store: (typeof bothStores)[number]): Promise<void> {
  let run = 0;
  await fc.assert(
    fc.asyncProperty(programArbitrary(form), async (program) => {
      const world = new AdapterWorld(program, store.make(), run++);
      current = world;
      try {
        await world.play();
      } catch (error) {
        throw new Error(`${(error as Error).message}\n\nThe program (${store.name} store):\n${describeProgram(program)}`);
      } finally {
        current = undefined;
        await world.stop();
      }
    }),
    {
      numRuns: RUNS,
      endOnFailure: !SHRINK,
      ...(SEED === undefined ? {} : { seed: SEED }),
      ...(PATH === undefined ? {} : { path: PATH }),
    },
  );
}

describe.each(FORMS)("the adapter model, %s: random request programs keep the limit and tell the truth", (form) => {
  it.each(bothStores)(`$name store (${RUNS} programs)`, (store) => programs(form, store), 600_000);
});
