// Runs the cases of onnx_write_cases (manifest.json in the folder given as argv[2]) in ONNX
// Runtime (the npm package onnxruntime-node, loaded from the node_modules folder argv[3]) and
// compares with tapegrad's outputs (float32, or float64 for cases of dtype float64). A case with
// onnxruntime_expect "no_kernel" (a float64 graph export_onnx warned about) must instead fail
// to load with ONNX Runtime's "Could not find an implementation". Exit 0: all passed; 1: a run
// failed; 77: onnxruntime-node is not installed there (scripts/setup.sh installs it).
const fs = require('fs');
const path = require('path');

async function main() {
  const folder = process.argv[2];
  const modules = process.argv[3];
  let ort;
  try {
    ort = require(path.join(modules, 'onnxruntime-node'));
  } catch (e) {
    console.log(`check_ort: cannot load onnxruntime-node from ${modules}: ${e.message}`);
    return 77;
  }
  const manifest = JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8'));
  const tol = manifest.tolerance;
  let failures = 0;
  const version = require(path.join(modules, 'onnxruntime-node', 'package.json')).version;
  console.log(`onnxruntime-node ${version}`);
  for (const c of manifest.cases) {
    if (!c.engines.includes('onnxruntime')) continue;
    const noKernel = c.onnxruntime_expect === 'no_kernel';
    let session;
    try {
      session = await ort.InferenceSession.create(path.join(folder, c.model), {logSeverityLevel: noKernel ? 4 : 2});
    } catch (e) {
      const ok = noKernel && e.message.includes('Could not find an implementation');
      if (!ok) failures++;
      console.log(`${ok ? 'PASS' : 'FAIL'} onnxruntime ${c.name}: cannot load the model` +
                  (ok ? ' (no float64 kernel, as export_onnx warned)' : `: ${e.message}`));
      continue;
    }
    if (noKernel) {
      console.log(`FAIL onnxruntime ${c.name}: loaded, but export_onnx warned that ONNX Runtime has no float64 kernel for it`);
      failures++;
    }
    const f64 = c.dtype === 'float64';
    for (const run of c.runs) {
      const read = (f) => {
        const b = fs.readFileSync(path.join(folder, f));
        const copy = b.buffer.slice(b.byteOffset, b.byteOffset + b.length);  // aligned for Float64Array
        return f64 ? new Float64Array(copy) : new Float32Array(copy);
      };
      const x = new ort.Tensor(f64 ? 'float64' : 'float32', read(run.input), run.input_shape);
      const want = read(run.output);
      let out;
      try {
        out = (await session.run({ [session.inputNames[0]]: x }))[session.outputNames[0]];
      } catch (e) {
        console.log(`FAIL onnxruntime ${c.name} batch ${run.batch}: ${e.message}`);
        failures++;
        continue;
      }
      const shapeOk = JSON.stringify(Array.from(out.dims)) === JSON.stringify(run.output_shape);
      let err = shapeOk ? 0 : Infinity;
      if (shapeOk)
        for (let i = 0; i < want.length; i++)
          err = Math.max(err, Math.abs(out.data[i] - want[i]) / Math.max(1, Math.abs(want[i])));
      const ok = shapeOk && err <= tol;
      if (!ok) failures++;
      console.log(`${ok ? 'PASS' : 'FAIL'} onnxruntime ${c.name} batch ${run.batch}: ` +
                  (shapeOk ? `max error ${err.toPrecision(3)} (tolerance ${tol})` :
                             `shape [${out.dims}], expected [${run.output_shape}]`));
    }
  }
  console.log(`check_ort: ${failures} failure(s)`);
  return failures ? 1 : 0;
}

main().then((rc) => process.exit(rc), (e) => { console.log(`check_ort: ${e.stack}`); process.exit(1); });
