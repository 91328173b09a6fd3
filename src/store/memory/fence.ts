import { microsAt } from "./clock.js";
import type { IdState } from "./state.js";

/**
 * The fence of a grant made now (lua/lib/fence.lua, `fence_next`): past the
 * id's last, and not behind the clock. The id is kept until the clock has
 * passed it (see settle.ts), so a fence is never given twice. `now`: the
 * step's reading of the clock, when it has one (see `microsAt`).
 */
export function fenceNext(state: IdState, now?: number): number {
  state.fence = Math.max(state.fence + 1, microsAt(state.env.clock, now));
  return state.fence;
}
