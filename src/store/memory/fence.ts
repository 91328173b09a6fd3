import type { IdState } from "./state.js";

/**
 * The fence of a grant made now (lua/lib/fence.lua, `fence_next`): past the
 * id's last, and not behind the clock. The id is kept until the clock has
 * passed it (see settle.ts), so a fence is never given twice.
 */
export function fenceNext(state: IdState): number {
  state.fence = Math.max(state.fence + 1, state.env.clock.micros());
  return state.fence;
}
