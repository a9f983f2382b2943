// Transpiles the lock-client component into an ES module that Node can run:
// `node transpile.js COMPONENT.wasm` writes out/latchkey.js (and its core wasm files).
//
// jco's transpiler splits the component into core wasm modules and JS glue that lifts and
// lowers WIT values. WASI imports go to @bytecodealliance/preview2-shim; the component's own
// `redis` import goes to redis-host.js (the path is relative to out/, where the glue lands).

import { transpile, writeFiles } from '@bytecodealliance/jco-transpile';

const [component] = process.argv.slice(2);
if (!component) {
  console.error('usage: node transpile.js COMPONENT.wasm');
  process.exit(2);
}
const { files } = await transpile(component, {
  name: 'latchkey',
  outDir: 'out',
  map: { 'latchkey:locks/redis': '../redis-host.js' },
});
await writeFiles(files);
