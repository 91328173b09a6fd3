import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createServer, Socket } from "node:net";

/** The command that installs the binary, shown when it is missing. */
export const INSTALL_HINT =
  "redis-server was not found on PATH. Install it (Debian/Ubuntu: sudo apt-get install -y redis-server; macOS: brew install redis), or set REDIS_URL to a running server.";

export function assertRedisServerInstalled(): void {
  const probe = spawnSync("redis-server", ["--version"], { encoding: "utf8" });
  if (probe.error !== undefined || probe.status !== 0) throw new Error(INSTALL_HINT);
}

/** A port nothing listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once("error", () => done(false));
    socket.connect(port, "127.0.0.1", () => socket.write("PING\r\n"));
    socket.once("data", (data) => done(data.toString().startsWith("+PONG")));
  });
}

/** A private redis-server this test run owns: started on a free port, stopped by `stop()`. */
export interface RedisServer {
  port: number;
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts a throw-away redis-server (no persistence) and waits until it
 * answers PING. Extra arguments are passed through (`--maxmemory`, ...).
 */
export async function startRedisServer(extra: string[] = [], port?: number): Promise<RedisServer> {
  assertRedisServerInstalled();
  const chosen = port ?? (await freePort());
  const child = spawn(
    "redis-server",
    [
      "--port",
      String(chosen),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--enable-debug-command",
      "local",
      ...extra,
    ],
    { stdio: "ignore" },
  );
  let exited = false;
  child.once("exit", () => {
    exited = true;
  });
  const started = Date.now();
  while (!(await answersPing(chosen))) {
    if (exited) throw new Error(`redis-server on port ${chosen} exited during start-up`);
    if (Date.now() - started > 10_000) {
      child.kill("SIGKILL");
      throw new Error(`redis-server on port ${chosen} did not answer PING within 10 s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    port: chosen,
    url: `redis://127.0.0.1:${chosen}`,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGKILL");
      }),
  };
}
