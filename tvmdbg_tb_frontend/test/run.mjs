// Runs the dashboard's unit tests with Node's own test runner: esbuild compiles each
// test/*.test.ts (with the sources it imports) to node_modules/.cache/, then `node --test` runs them.
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const outdir = path.join(root, "node_modules", ".cache", "tvmdbg-tests");
const tests = readdirSync(path.join(root, "test")).filter((f) => f.endsWith(".test.ts"));
rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: tests.map((f) => path.join(root, "test", f)),
  outdir,
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  outExtension: { ".js": ".mjs" },
  loader: { ".css": "text" },
  logLevel: "warning",
});
const files = tests.map((f) => path.join(outdir, f.replace(/\.ts$/, ".mjs")));
const result = spawnSync(process.execPath, ["--test", ...files], { stdio: "inherit" });
process.exit(result.status ?? 1);
