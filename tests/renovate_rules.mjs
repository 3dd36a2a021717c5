// What Renovate's own code makes of each dependency its extraction found, offline: the repository config
// (renovate.json over Renovate's defaults, its presets resolved as the repository worker resolves them), then per
// dependency the steps of workers/repository/process/fetch.js before a lookup (the manager's config, the package
// file's, the dependency's, the datasource's defaults and versioning, applyPackageRules "pre-lookup"), and whether
// the versioning it ends with takes the current value; and where the bumpVersions those rules attach find the version
// they would bump (workers/repository/update/branch/bump-versions.js: each matchString, templated, run with
// Renovate's regEx on each file its filePatterns match; the version group's first place in the match, which is what
// it replaces). Nothing is looked up. Used by tests/test_renovate.py.
//
// node renovate_rules.mjs <renovate dist dir> <tree root (a git repository)> <report.json of `renovate --dry-run=extract`>
// stdout: JSON {deps, bumped}: one entry per extracted dependency (the extraction's fields, `customManager`: the
// index in customManagers of a regex dependency's manager, by its matchStrings, and `settings`: what the rules
// decided), and the {file, start, end} (in code points) of each version a bumpVersions rule finds.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const [dist, root, reportFile] = process.argv.slice(2);
const configFile = `${root}/renovate.json`;
const { getConfig } = await import(`${dist}/config/defaults.js`);
const { resolveConfigPresets } = await import(`${dist}/config/presets/index.js`);
const { migrateConfig } = await import(`${dist}/config/migration.js`);
const { mergeChildConfig, getManagerConfig, applyDatasourceDefaultConfig } = await import(`${dist}/config/index.js`);
const { applyPackageRules } = await import(`${dist}/util/package-rules/index.js`);
const { getDefaultVersioning } = await import(`${dist}/modules/datasource/common.js`);
const versioning = await import(`${dist}/modules/versioning/index.js`);
const { regEx } = await import(`${dist}/util/regex.js`);
const { compile } = await import(`${dist}/util/template/index.js`);
const { matchRegexOrGlobList } = await import(`${dist}/util/string-match.js`);

const repoConfig = JSON.parse(readFileSync(configFile, "utf8"));
const { migratedConfig } = migrateConfig(repoConfig);
const { config: resolved } = await resolveConfigPresets(migratedConfig, getConfig());
const config = mergeChildConfig(getConfig(), resolved);
const customIndex = new Map(repoConfig.customManagers.map((m, i) => [JSON.stringify(m.matchStrings), i]));

const SETTINGS = ["groupName", "automerge", "pinDigests", "versioning", "dependencyDashboardApproval", "bumpVersions"];
const out = [];
const bumps = new Map(); // one entry per bumpVersions rule, with the config of a dependency it applies to
const packageFiles = JSON.parse(readFileSync(reportFile, "utf8")).repositories.local.packageFiles;
for (const [manager, files] of Object.entries(packageFiles)) {
  const managerConfig = getManagerConfig(config, manager);
  for (const packageFile of files) {
    const packageFileConfig = mergeChildConfig(managerConfig, packageFile);
    const customManager = packageFile.matchStrings ? customIndex.get(JSON.stringify(packageFile.matchStrings)) : null;
    for (const dep of packageFile.deps) {
      let depConfig = mergeChildConfig(packageFileConfig, dep);
      depConfig = await applyDatasourceDefaultConfig(depConfig);
      depConfig.versioning ??= getDefaultVersioning(depConfig.datasource);
      depConfig = await applyPackageRules(depConfig, "pre-lookup");
      const settings = Object.fromEntries(SETTINGS.map((key) => [key, depConfig[key] ?? null]));
      for (const bump of depConfig.bumpVersions ?? []) bumps.set(JSON.stringify(bump), [bump, depConfig]);
      const scheme = versioning.get(depConfig.versioning);
      out.push({
        manager: manager === "regex" ? "custom.regex" : manager,
        customManager: customManager ?? null,
        packageFile: packageFile.packageFile,
        depName: dep.depName ?? null,
        packageName: depConfig.packageName ?? dep.depName ?? null,
        datasource: dep.datasource ?? null,
        depType: dep.depType ?? null,
        currentValue: dep.currentValue ?? null,
        currentDigest: dep.currentDigest ?? null,
        replaceString: dep.replaceString ?? null,
        skipReason: dep.skipReason ?? null,
        settings: {
          ...settings,
          versioningTakesCurrentValue: dep.currentValue ? scheme.isValid(dep.currentValue) : null,
        },
      });
    }
  }
}
const files = execFileSync("git", ["ls-files"], { cwd: root, encoding: "utf8" }).split("\n").filter(Boolean);
const bumped = [];
for (const [bump, depConfig] of bumps.values()) {
  const patterns = bump.filePatterns.map((pattern) => compile(pattern, depConfig));
  for (const file of files.filter((f) => matchRegexOrGlobList(f, patterns))) {
    const content = readFileSync(`${root}/${file}`, "utf8");
    for (const matchString of bump.matchStrings) {
      const found = regEx(compile(matchString, depConfig)).exec(content);
      const version = found?.groups?.version;
      if (!version) continue;
      const start = [...content.slice(0, found.index + found[0].indexOf(version))].length;
      bumped.push({ file, start, end: start + [...version].length });
    }
  }
}
process.stdout.write(JSON.stringify({ deps: out, bumped }));
