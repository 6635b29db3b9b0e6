// Preload for Node test servers: a listen() without a host binds 127.0.0.1, never all interfaces.
//
// Use: NODE_OPTIONS="--require /abs/path/force_loopback.cjs" node server.js
// Servers such as `mcp-server-everything streamableHttp` call `app.listen(PORT, cb)`, which
// Node binds to every interface; the tests must listen on loopback only. Covers the
// forms listen(port[, backlog][, cb]) and listen({port}[, cb]); explicit hosts and
// pipes/handles are left alone.
"use strict";

const net = require("node:net");

const LOOPBACK = "127.0.0.1";
const originalListen = net.Server.prototype.listen;

function isPort(value) {
  return typeof value === "number" || (typeof value === "string" && /^\d+$/.test(value));
}

net.Server.prototype.listen = function listenOnLoopback(...args) {
  const first = args[0];
  if (isPort(first) && typeof args[1] !== "string") {
    args.splice(1, 0, LOOPBACK);
  } else if (first && typeof first === "object" && "port" in first && first.host === undefined && first.path === undefined) {
    args[0] = { ...first, host: LOOPBACK };
  }
  return originalListen.apply(this, args);
};
