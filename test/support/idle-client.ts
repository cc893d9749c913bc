import net from "node:net";

/**
 * A client that holds idle TCP connections open to one server, as the client that exhausted a process's file
 * descriptors did: it sends nothing, and re-opens every connection that is closed, until told to stop. Run as
 * a child process (`fork`), one per few thousand connections, since a process can hold no more sockets than
 * its own descriptor limit.
 *
 * argv: host, port, connections. Messages to the parent: `{ ready: true }` once it has attempted as many
 * connections as it was asked to hold; `{ stopped: true }` once all are closed after a `"stop"` message.
 */

/** What the parent is told. */
export type IdleClientMessage = { ready: true } | { stopped: true };

const [host = "127.0.0.1", portText = "0", countText = "0"] = process.argv.slice(2);
const port = Number(portText);
const target = Number(countText);

// Pacing, so that the connects never overflow the server's listen backlog (511). A connect completes in the
// kernel before the server accepts it, so a full backlog shows here only by its effect: a dropped SYN, sent
// again a second later. So each client starts at 1,000 connects a second, adds 1,000 each second up to
// MAX_RATE, and halves its rate whenever a connect is still pending after STALL_MS (that one is abandoned
// and made again at once, rather than waiting out the retransmission): about as fast as the server accepts,
// on an idle machine or a loaded one.
const TICK_MS = 10;
const STALL_MS = 150;
const MIN_RATE = 100;
const MAX_RATE = 3_000;
// Once every connection has been attempted, closed ones are re-opened at most this fast: as persistent as
// the real client, without keeping every core of the machine running the test busy.
const REOPEN_RATE = 1_000;

const open = new Set<net.Socket>();
let connecting = 0;
let attempted = 0;
let owed = target;
let stopping = false;
let rate = 1_000;
let tokens = 0;
let stalled = false;

const tick = setInterval(() => {
  if (!stalled) rate = Math.min(MAX_RATE, rate + 10);
  stalled = false;
  tokens = Math.min(
    tokens + ((attempted >= target ? Math.min(rate, REOPEN_RATE) : rate) * TICK_MS) / 1000,
    500,
  );
  pump();
}, TICK_MS);

function attemptedOne(): void {
  attempted += 1;
  if (attempted === target) process.send?.({ ready: true } satisfies IdleClientMessage);
}

function connectOne(): void {
  connecting += 1;
  owed -= 1;
  const socket = net.connect({ host, port });
  let established = false;
  let abandoned = false;
  socket.on("error", () => undefined);
  const watchdog = setTimeout(
    // Decided after the next poll phase: a connect that completed while this process was too busy to see it
    // (a loaded machine) is not a stall.
    () =>
      setImmediate(() => {
        if (established || socket.destroyed) return;
        abandoned = true;
        stalled = true;
        rate = Math.max(MIN_RATE, rate / 2);
        socket.destroy();
      }),
    STALL_MS,
  );
  socket.once("connect", () => {
    clearTimeout(watchdog);
    established = true;
    connecting -= 1;
    if (stopping) return void socket.destroy();
    open.add(socket);
    attemptedOne();
  });
  socket.once("close", () => {
    clearTimeout(watchdog);
    if (!established) {
      connecting -= 1;
      if (!abandoned) attemptedOne();
    }
    open.delete(socket);
    if (stopping) {
      if (open.size === 0 && connecting === 0) finish();
      return;
    }
    owed += 1;
    pump();
  });
}

/** Opens what is owed, as far as the rate allows. */
function pump(): void {
  while (!stopping && owed > 0 && tokens >= 1) {
    tokens -= 1;
    connectOne();
  }
}

function finish(): void {
  clearInterval(tick);
  process.send?.({ stopped: true } satisfies IdleClientMessage, () => process.exit(0));
}

process.on("message", (message) => {
  if (message !== "stop") return;
  stopping = true;
  if (open.size === 0 && connecting === 0) return finish();
  // Reset rather than closed, so that no TIME_WAIT is left holding these ports; one the server has already
  // closed is ending too, and Node cannot reset it (it would never emit "close").
  for (const s of open) {
    if (s.writableEnded) s.destroy();
    else s.resetAndDestroy();
  }
});
