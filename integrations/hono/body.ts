import type { Exchange } from "../http/exchange.js";

/**
 * Off Node (Bun, Deno, Workers) there is no response object to watch: the
 * body stream is wrapped instead. Its end completes the response; its
 * cancellation means the client left; a lost lease errors it, so the client
 * sees a cut stream rather than a complete-looking one.
 */
export function holdBody(res: Response, exchange: Exchange): Response {
  if (res.body === null) {
    exchange.responded();
    return res;
  }
  const reader = res.body.getReader();
  let stop: ((error: unknown) => void) | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      stop = (error) => {
        controller.error(error);
        reader.cancel(error).catch(() => {});
        exchange.responded();
      };
    },
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          exchange.responded();
        } else {
          controller.enqueue(value);
        }
      } catch (error) {
        controller.error(error);
        exchange.responded();
      }
    },
    cancel(reason) {
      exchange.clientGone();
      return reader.cancel(reason);
    },
  });
  exchange.onLost = (error) => stop?.(error);
  return new Response(body, res);
}
