// Several MCP Inspector CLI runs in one Node process: `node inspector_runs.mjs CLI_ENTRY`
// with a JSON list of argument lists on stdin; prints a JSON list of {code, stdout, stderr}.
//
// Each run is the CLI's own `runCli` (what `mcp-inspector --cli ARGS` runs after the
// launcher strips `--cli`): its own argument parsing, client, connection and session. A
// failure goes through the CLI's own error sink (`handleError`: the JSON error envelope on
// stderr, then `process.exit` with the CLI's exit code), whose exit is caught here and kept
// as the run's code. Starting Node and loading the Inspector costs about 0.4 s of CPU; this
// pays it once for every run (tests/serve/test_serve_inspector.py keeps one real CLI process).
import { pathToFileURL } from "node:url";

const [entry] = process.argv.slice(2);
const { runCli, handleError } = await import(pathToFileURL(entry).href);

let input = "";
for await (const chunk of process.stdin) input += chunk;
const runs = JSON.parse(input);

class Exit extends Error {
  constructor(code) {
    super(`exit ${code}`);
    this.code = code;
  }
}

const real = {
  out: process.stdout.write,
  err: process.stderr.write,
  exit: process.exit,
};

function capture(sink) {
  return (chunk, encoding, callback) => {
    sink.text += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    const done = typeof encoding === "function" ? encoding : callback;
    if (done) done();
    return true;
  };
}

const results = [];
for (const args of runs) {
  const out = { text: "" };
  const err = { text: "" };
  let code = 0;
  process.stdout.write = capture(out);
  process.stderr.write = capture(err);
  process.exit = (status) => {
    throw new Exit(status ?? 0);
  };
  try {
    await runCli([process.argv[0], "mcp-inspector", ...args]);
  } catch (error) {
    try {
      await handleError(error);
    } catch (exit) {
      if (!(exit instanceof Exit)) throw exit;
      code = exit.code;
    }
  } finally {
    process.stdout.write = real.out;
    process.stderr.write = real.err;
    process.exit = real.exit;
  }
  results.push({ code, stdout: out.text, stderr: err.text });
}
process.stdout.write(JSON.stringify(results) + "\n", () => process.exit(0));
