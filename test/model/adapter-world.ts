// One program played against one app (see adapter.test.ts): its clients, the operator and the
// shutdown on real timers, then the checks at the end.
import { request } from "node:http";
import { semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import type { Store } from "../../src/store/index.js";
import { eventually } from "../support/stores.js";
import { type ModelApp, startApp, USER_FAILURE } from "./adapter-apps.js";
import { AdapterMonitor } from "./adapter-monitor.js";
import { CLOSE_GRACE_MS, GRACE_MS, type Program, type RequestPlan } from "./adapter-program.js";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** `eventually`, as a verdict the monitor records: false if `check` never held within `withinMs`. */
const within = (withinMs: number, check: () => boolean | Promise<boolean>): Promise<boolean> =>
  eventually(check, withinMs).then(
    () => true,
    () => false,
  );

interface Answer {
  status: number;
  body: string;
}

/** Longest a handler or callback of a program works, left alone: see adapter-program.ts. */
const LONGEST_WORK_MS = 300 + 500;

export class AdapterWorld {
  readonly monitor: AdapterMonitor;
  /** The semaphore's name: one per program, so programs on one Redis share nothing. */
  readonly name: string;
  readonly #program: Program;
  readonly #store: Store;
  #app: ModelApp | undefined;
  readonly #answers: (Answer | undefined)[] = [];

  constructor(program: Program, store: Store, run: number) {
    this.#program = program;
    this.#store = store;
    this.monitor = new AdapterMonitor(program);
    this.name = `am-${program.form}-${run}-${process.pid}-${Date.now().toString(36)}`;
  }

  async play(): Promise<void> {
    const program = this.#program;
    const monitor = this.monitor;
    this.#app = await startApp({ program, monitor, store: this.#store, name: this.name });
    const timers: NodeJS.Timeout[] = [];
    const { steal, shutdown } = program;
    if (steal !== undefined) timers.push(setTimeout(() => void this.#steal(steal.nth), steal.at));
    let shut: Promise<void> | undefined;
    if (shutdown !== undefined) {
      timers.push(
        setTimeout(() => {
          monitor.shutdown();
          shut = (this.#app as ModelApp).shutdown();
        }, shutdown.at),
      );
    }
    await Promise.all(program.requests.map((plan, index) => this.#send(index, plan)));
    // The shutdown may be due after the last answer: it still happens, with handlers at work or not.
    if (shutdown !== undefined) await within(shutdown.at + 100, () => shut !== undefined);
    await shut;
    for (const timer of timers) clearTimeout(timer);

    if (!(await within(LONGEST_WORK_MS + 2_000, () => monitor.idle))) monitor.fail("a handler or stream callback never settled");
    const count = () => semaphore({ client: this.#store, limit: program.limit }).count(this.name);
    const returned = await within(GRACE_MS + CLOSE_GRACE_MS + 3_000, async () => monitor.allReleased && (await count()) === 0);
    if (!returned) {
      monitor.fail(
        `not every permit returned: the store counts ${await count()} held; never released: ${monitor.unreleased().join(", ") || "none"}`,
      );
    }
    this.#checkAnswers();
    if (monitor.violations.length > 0) {
      throw new Error(
        `${monitor.violations.join("\n")}\n\nWhat happened:\n${monitor.log.join("\n")}\n\nAnswers:\n${this.#describeAnswers()}`,
      );
    }
  }

  async stop(): Promise<void> {
    await this.#app?.stop();
  }

  async #steal(nth: number): Promise<void> {
    const token = this.monitor.steal(nth);
    if (token === undefined) return;
    await this.#store.semaphore.release({ storeKey: storeKey("semaphore", "semaphore", this.name), token });
  }

  /** Sends request `index` at its time and follows its client's plan; resolves once its connection is over. */
  async #send(index: number, plan: RequestPlan): Promise<void> {
    await sleep(plan.at);
    const url = `${(this.#app as ModelApp).url}/m`;
    await new Promise<void>((resolve) => {
      let status = 0;
      let body = "";
      let over = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = () => {
        clearTimeout(timer);
        this.#answers[index] ??= { status, body };
        resolve();
      };
      const req = request(url, { method: plan.head ? "HEAD" : "GET", headers: { "x-req": String(index), connection: "close" } });
      const leave = () => {
        if (over) return;
        over = true;
        this.monitor.clientLeft(index);
        req.destroy();
      };
      if (typeof plan.leave === "number") timer = setTimeout(leave, plan.leave);
      req.on("response", (res) => {
        status = res.statusCode ?? 0;
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
          if (plan.leave === "firstByte") leave();
        });
        res.on("end", () => {
          over = true;
        });
        res.on("close", finish);
      });
      req.on("error", finish);
      req.end();
    });
  }

  #checkAnswers(): void {
    this.#program.requests.forEach((plan, index) => {
      const answer = this.#answers[index];
      if (answer === undefined || answer.status !== 500) return;
      // A 500 is the app's answer to the handler's own failure; leasehold's errors have answers of their own.
      if (plan.fails === "before" && (plan.head || answer.body.includes(USER_FAILURE))) return;
      this.monitor.fail(`#${index} was answered 500: ${answer.body.slice(0, 300)}`);
    });
  }

  #describeAnswers(): string {
    return this.#program.requests
      .map((_plan, index) => {
        const answer = this.#answers[index];
        return `  #${index}: ${answer === undefined ? "none" : `${answer.status} ${JSON.stringify(answer.body.slice(0, 120))}`}`;
      })
      .join("\n");
  }
}
