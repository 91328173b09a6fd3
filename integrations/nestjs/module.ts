import {
  type DynamicModule,
  Global,
  type InjectionToken,
  Module,
  type ModuleMetadata,
  type Provider,
  type Type,
} from "@nestjs/common";
import { ValidationError } from "../../src/errors/index.js";
import { prefix as checkPrefix, delayMs, knownOptions, optionsObject } from "../../src/options/validate.js";
import { given, parseAdmissionOptions } from "../http/config.js";
import { LeaseholdGuard } from "./guard.js";
import { LEASEHOLD_OPTIONS, type LeaseholdModuleOptions, MODULE_DEFAULTS } from "./options.js";

/**
 * A class that makes the module options, for `forRootAsync({ useClass })` or
 * `forRootAsync({ useExisting })`, as `@nestjs/throttler`'s options factories do.
 *
 * @example
 * ```ts
 * @Injectable()
 * class LeaseholdConfig implements LeaseholdOptionsFactory {
 *   constructor(private readonly config: ConfigService) {}
 *   createLeaseholdOptions(): LeaseholdModuleOptions {
 *     return { client: new Redis(this.config.getOrThrow("REDIS_URL")) };
 *   }
 * }
 * ```
 */
export interface LeaseholdOptionsFactory {
  createLeaseholdOptions(): LeaseholdModuleOptions | Promise<LeaseholdModuleOptions>;
}

/**
 * Options of {@link LeaseholdModule.forRootAsync}: exactly one of
 * `useFactory` (with `inject`), `useClass` or `useExisting`.
 *
 * @example
 * ```ts
 * const options: LeaseholdModuleAsyncOptions = { imports: [ConfigModule], useClass: LeaseholdConfig };
 * ```
 */
export interface LeaseholdModuleAsyncOptions extends Pick<ModuleMetadata, "imports"> {
  /** Makes the options from the providers named in `inject`. */
  useFactory?: (...args: never[]) => LeaseholdModuleOptions | Promise<LeaseholdModuleOptions>;
  /** What `useFactory` is given, in order. */
  inject?: InjectionToken[];
  /** A {@link LeaseholdOptionsFactory} the module instantiates (with its own dependencies). */
  useClass?: Type<LeaseholdOptionsFactory>;
  /** A {@link LeaseholdOptionsFactory} already provided elsewhere (from `imports`), reused. */
  useExisting?: Type<LeaseholdOptionsFactory>;
}

const WHERE = "LeaseholdModule options";

/**
 * The module's options are every route's defaults, and its shutdown grace is
 * used at shutdown: a bad one (a prefix with a colon, `exposeFence: "yes"`, a
 * typo, a negative grace) is refused when the module is configured, not on
 * the first request or at the last moment.
 */
function checked(options: LeaseholdModuleOptions): LeaseholdModuleOptions {
  // The module takes the routes' defaults and its own shutdown grace.
  knownOptions(optionsObject(options, WHERE), [...MODULE_DEFAULTS, "shutdownGraceMs"], WHERE);
  if (options?.prefix !== undefined) checkPrefix(options.prefix);
  if (options?.shutdownGraceMs !== undefined) {
    delayMs("shutdownGraceMs", options.shutdownGraceMs, "Pass how long requests in flight may finish at shutdown, e.g. 10000.");
  }
  parseAdmissionOptions({ kind: "lock", name: "module", options: given(options ?? {}, MODULE_DEFAULTS) }, WHERE);
  return options;
}

/** The providers of `forRootAsync`: the options, made by a factory function or class. */
function asyncProviders(options: LeaseholdModuleAsyncOptions): Provider[] {
  const ways = [options.useFactory, options.useClass, options.useExisting].filter((way) => way !== undefined).length;
  if (ways !== 1) {
    throw new ValidationError(
      "forRootAsync",
      `LeaseholdModule.forRootAsync needs exactly one of useFactory, useClass or useExisting, got ${ways}.`,
    );
  }
  const { useFactory, useClass, useExisting } = options;
  const factoryClass = useClass ?? useExisting;
  if (factoryClass !== undefined) {
    const fromClass: Provider = {
      provide: LEASEHOLD_OPTIONS,
      useFactory: async (made: LeaseholdOptionsFactory) => checked(await made.createLeaseholdOptions()),
      inject: [factoryClass],
    };
    // useExisting: the class is a provider of an imported module; useClass: this module provides it.
    return useClass === undefined ? [fromClass] : [fromClass, { provide: useClass, useClass }];
  }
  // The one way left. Typed with `never[]` parameters so that user factories may name theirs; Nest passes what `inject` lists.
  const make = useFactory as (...args: unknown[]) => LeaseholdModuleOptions | Promise<LeaseholdModuleOptions>;
  return [
    {
      provide: LEASEHOLD_OPTIONS,
      useFactory: async (...args: unknown[]) => checked(await make(...args)),
      inject: options.inject ?? [],
    },
  ];
}

/**
 * Configures the client and defaults of every `@Semaphore` and `@Lock` in
 * the app. Global: import it once, in the root module.
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis";
 * import { LeaseholdModule } from "leasehold/nestjs";
 *
 * const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
 * redis.on("error", (error) => console.error("redis:", error.message));
 *
 * @Module({ imports: [LeaseholdModule.forRoot({ client: redis })] })
 * export class AppModule {}
 * ```
 */
@Global()
@Module({})
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class by contract
export class LeaseholdModule {
  static forRoot(options: LeaseholdModuleOptions = {}): DynamicModule {
    return {
      module: LeaseholdModule,
      providers: [{ provide: LEASEHOLD_OPTIONS, useValue: checked(options) }, LeaseholdGuard],
      exports: [LEASEHOLD_OPTIONS, LeaseholdGuard],
    };
  }

  /**
   * Like `forRoot`, with options made when the app starts: by a factory
   * (`useFactory` and `inject`), by a class the module instantiates
   * (`useClass`), or by one another module provides (`useExisting`).
   *
   * @example
   * ```ts
   * LeaseholdModule.forRootAsync({
   *   imports: [ConfigModule],
   *   inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({ client: new Redis(config.getOrThrow("REDIS_URL")) }),
   * });
   * LeaseholdModule.forRootAsync({ imports: [ConfigModule], useClass: LeaseholdConfig });
   * ```
   */
  static forRootAsync(options: LeaseholdModuleAsyncOptions): DynamicModule {
    return {
      module: LeaseholdModule,
      imports: options.imports ?? [],
      providers: [...asyncProviders(options), LeaseholdGuard],
      exports: [LEASEHOLD_OPTIONS, LeaseholdGuard],
    };
  }
}
