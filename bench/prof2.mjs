import { Redis } from "ioredis";
import { scripts } from "../dist/esm/src/store/lua.generated.js";
const redis = new Redis(process.env.REDIS_URL);
const admin = new Redis(process.env.REDIS_URL);
async function cost(label, src, keys, args) {
  const sha = await redis.script("LOAD", src);
  await admin.config("RESETSTAT");
  await Promise.all(Array.from({ length: 32 }, async () => { for (let i = 0; i < 1000; i++) await redis.evalsha(sha, keys.length, ...keys, ...args); }));
  const s = await admin.info("commandstats");
  console.log(label, /cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(s)[1], "us/call");
}
const k = ["{p:k}", "{p:k}:w", "{p:k}:q", "{p:k}:qi", "{p:k}:qe", "{p:k}:n", "{p:k}:l"];
await cost("trivial", "return 1", [], []);
await cost("time only", "local t = redis.call('TIME') return 1", [], []);
await cost("shebang trivial", "#!lua\nreturn 1", [], []);
await cost("acquire+release pair (acquire)", scripts.semaphoreAcquire.source, k, ["tok", 100000, 1, 60000, 0, 0, "{p:k}:ch"]);
await cost("release", scripts.semaphoreRelease.source, k, ["tok", "{p:k}:ch", 1]);
await cost("functions defined, nothing run", scripts.semaphoreAcquire.source.replace(/\nholders_prune\(now\)[\s\S]*$/, "\nreturn 1"), k, ["tok", 100000, 1, 60000, 0, 0, "{p:k}:ch"]);
redis.disconnect(); admin.disconnect();
