// Renovate's own digest pin of a dependency, offline: its extraction of the file with the custom manager, then its
// auto-replace (workers/repository/update/branch/auto-replace.js doAutoReplace) of a `pin` update that adds a digest.
// Test data only: the digest is given, no registry is asked. Used by tests/test_renovate.py.
//
// node renovate_pin.mjs <renovate dist dir> <tree root>   (stdin: JSON list of {file, manager, depName, digest})
// stdout: JSON list of {file, depName, content} (content null when Renovate's replace failed), the tree unchanged.
import { readFileSync, writeFileSync } from "node:fs";

const [dist, root] = process.argv.slice(2);
const { GlobalConfig } = await import(`${dist}/config/global.js`);
const { extractPackageFile } = await import(`${dist}/modules/manager/index.js`);
const { doAutoReplace } = await import(`${dist}/workers/repository/update/branch/auto-replace.js`);
GlobalConfig.set({ localDir: root });

const jobs = JSON.parse(readFileSync(0, "utf8"));
const results = [];
for (const { file, manager, depName, digest } of jobs) {
  const path = `${root}/${file}`;
  const original = readFileSync(path, "utf8");
  const extracted = await extractPackageFile("regex", original, file, manager);
  const depIndex = (extracted?.deps ?? []).findIndex((d) => d.depName === depName && !d.currentDigest);
  let content = null;
  if (depIndex >= 0) {
    const dep = extracted.deps[depIndex];
    const upgrade = {
      ...manager, ...dep, depIndex, manager: "regex", packageFile: file,
      newValue: dep.currentValue, newDigest: digest, updateType: "pin", isPinDigest: true,
    };
    try {
      content = await doAutoReplace(upgrade, original, false);
    } catch {
      content = null; // Renovate's WORKER_FILE_UPDATE_FAILED
    }
  }
  writeFileSync(path, original); // doAutoReplace writes into the tree as it searches
  results.push({ file, depName, content });
}
process.stdout.write(JSON.stringify(results));
