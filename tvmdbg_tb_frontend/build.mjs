// Bundles src/index.ts (with its CSS and libraries) into dist/index.js: the ES module that
// TensorBoard's plugin_entry.html imports. One self-contained file: the iframe's CSP blocks CDNs.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));

await build({
  entryPoints: [path.join(here, "src", "index.ts")],
  outfile: path.join(here, "dist", "index.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  minify: true,
  sourcemap: false,
  legalComments: "eof",
  loader: { ".css": "text" },
  logLevel: "warning",
});
