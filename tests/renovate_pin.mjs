// Renovate's own digest pins of a file, offline: its extraction of the file (a custom regex manager's, or a built-in
// manager's), then its auto-replace (workers/repository/update/branch/auto-replace.js doAutoReplace) of a `pin` update
// for each dependency named, one after the other on the file as it goes, as Renovate's branch worker applies them.
// Test data only: the digest is given, no registry is asked. Used by tests/test_renovate.py.
//
// node renovate_pin.mjs <renovate dist dir> <tree root>
// stdin: JSON list of {file, manager, config, depNames, digest}
// stdout: JSON list of {file, content, pinned} (content null when Renovate's replace failed); the tree is left as it was.
import { readFileSync, writeFileSync } from "node:fs";

const [dist, root] = process.argv.slice(2);
const { GlobalConfig } = await import(`${dist}/config/global.js`);
const { extractPackageFile } = await import(`${dist}/modules/manager/index.js`);
const { doAutoReplace } = await import(`${dist}/workers/repository/update/branch/auto-replace.js`);
GlobalConfig.set({ localDir: root });

const results = [];
for (const { file, manager, config, depNames, digest } of JSON.parse(readFileSync(0, "utf8"))) {
  const path = `${root}/${file}`;
  const original = readFileSync(path, "utf8");
  const extracted = await extractPackageFile(manager, original, file, config);
  let content = original;
  let pinned = 0;
  for (const [depIndex, dep] of (extracted?.deps ?? []).entries()) {
    if (!depNames.includes(dep.depName) || dep.currentDigest) continue;
    const upgrade = {
      ...config, ...dep, depIndex, manager, packageFile: file,
      newValue: dep.currentValue, newDigest: digest, updateType: "pin", isPinDigest: true,
    };
    try {
      content = await doAutoReplace(upgrade, content, false, pinned === 0);
      pinned += 1;
    } catch {
      content = null; // Renovate's WORKER_FILE_UPDATE_FAILED
      break;
    }
  }
  writeFileSync(path, original); // doAutoReplace writes into the tree as it searches
  results.push({ file, content, pinned });
}
process.stdout.write(JSON.stringify(results));
