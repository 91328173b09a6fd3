import { holdUntil } from "./hold.js";
import { queueLatest, queuePrune } from "./queue.js";
import type { IdState, Primitive } from "./state.js";

/**
 * How every step that changes an id ends (lua/lib/settle.lua,
 * lua/lib/lock.lua): the id lives exactly until the latest lease or
 * waiter lease it holds ends, and vanishes with it, as Redis keys do; the last
 * fence stays until the clock has passed it (lua/lib/fence.lua), the typical
 * hold while it counts (lua/lib/hold.lua). One timer per id, at the latest
 * expiry it holds, neither leaking nor keeping the process alive: armed on the
 * id's first use, it fires, finds the id busy, and re-arms at the latest
 * expiry then (a timer may also fire early against the clock and re-arm). A
 * released id is not dropped at once: a busy id that empties between
 * requests would otherwise be rebuilt, with a timer, on every request.
 */
export function settle<State extends IdState>(primitive: Primitive<State>, state: State): void {
  if (state.cleanup !== undefined) return;
  const clock = state.env.clock;
  const sweep = (): number | undefined => {
    const now = clock.now();
    primitive.lapse(state, now);
    queuePrune(state.queue, now);
    const latest = Math.max(primitive.latest(state), queueLatest(state.queue));
    if (latest > 0) return latest;
    if (state.fence >= clock.micros()) return now + 1;
    const hold = holdUntil(state.hold, now);
    if (hold !== undefined) return hold;
    if (state.ids.get(state.key) === state) state.ids.delete(state.key);
    return undefined;
  };
  const arm = (at: number): void => {
    state.cleanup = clock.setTimeout(
      () => {
        state.cleanup = undefined;
        const next = sweep();
        if (next !== undefined) arm(next);
      },
      Math.max(1, Math.ceil(at - clock.now()) + 1),
    );
  };
  const next = sweep();
  if (next !== undefined) arm(next);
}
