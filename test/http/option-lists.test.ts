import { describe, expect, expectTypeOf, it } from "vitest";
import { type LeaseholdPluginOptions, PLUGIN_DEFAULTS } from "../../integrations/fastify/plugin.js";
import { ADAPTER_OPTIONS, ENGINE_OPTIONS, LOCK_OPTIONS, SEMAPHORE_OPTIONS } from "../../integrations/http/lists.js";
import type { AdmissionOptions, LockAdmissionOptions, SemaphoreAdmissionOptions } from "../../integrations/http/types.js";
import { type LeaseholdModuleOptions, MODULE_DEFAULTS } from "../../integrations/nestjs/options.js";

/** The options of `T` that `list` leaves out: `never` when the list names every one. */
type Unlisted<T, List extends readonly PropertyKey[]> = Exclude<keyof T, List[number]>;

// `satisfies` in the modules checks that each name is an option; these check that each option is named.
describe("adapter option lists", () => {
  it("name every option of their interfaces", () => {
    expectTypeOf<Unlisted<AdmissionOptions<unknown, unknown>, typeof ADAPTER_OPTIONS>>().toEqualTypeOf<never>();
    expectTypeOf<Unlisted<SemaphoreAdmissionOptions<unknown, unknown>, typeof SEMAPHORE_OPTIONS>>().toEqualTypeOf<never>();
    expectTypeOf<Unlisted<LockAdmissionOptions<unknown, unknown>, typeof LOCK_OPTIONS>>().toEqualTypeOf<never>();
    // The module's own option, its shutdown grace, is not a route default.
    expectTypeOf<Unlisted<LeaseholdModuleOptions, typeof MODULE_DEFAULTS>>().toEqualTypeOf<"shutdownGraceMs">();
    // Likewise the Fastify plugin's.
    expectTypeOf<Unlisted<LeaseholdPluginOptions, typeof PLUGIN_DEFAULTS>>().toEqualTypeOf<"shutdownGraceMs">();
  });

  it("name each option once", () => {
    for (const list of [ENGINE_OPTIONS, ADAPTER_OPTIONS, SEMAPHORE_OPTIONS, LOCK_OPTIONS, MODULE_DEFAULTS, PLUGIN_DEFAULTS]) {
      expect(new Set(list).size).toBe(list.length);
    }
  });
});
