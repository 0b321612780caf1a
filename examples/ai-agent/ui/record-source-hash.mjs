// Records a hash of the UI sources next to the built bundle; a Python test recomputes it,
// so a source change without a rebuild fails CI. Keep in step with tests/test_bundle.py.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";

const ROOT = new URL(".", import.meta.url).pathname;
const INPUTS = ["index.html", "package.json", "package-lock.json", "tsconfig.json", "vite.config.ts", "src"];

function files(path) {
  if (statSync(path).isDirectory()) {
    return readdirSync(path).sort().flatMap((name) => files(join(path, name)));
  }
  return [path];
}

const hash = createHash("sha256");
for (const file of INPUTS.flatMap((input) => files(join(ROOT, input)))) {
  hash.update(relative(ROOT, file).split("\\").join("/") + "\n");
  hash.update(readFileSync(file));
  hash.update("\n");
}
writeFileSync(join(ROOT, "../src/dex_agents_ai_agent/static/source-hash.txt"), hash.digest("hex") + "\n");
