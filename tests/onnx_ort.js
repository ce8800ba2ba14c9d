// Runs an ONNX model in ONNX Runtime (onnxruntime-node) and compares its
// outputs with nabla's, for tests/test_onnx_ort.sh:
//
//   node onnx_ort.js ORT_MODULE_DIR MODEL.onnx DIR [TOLERANCE]
//
// feeds DIR/in<i>.npy to the graph's inputs in order and compares output j
// with DIR/nabla_out<j>.npy: the largest |ort - nabla| over max(1, max
// |nabla|). Prints it; exits 1 above TOLERANCE (default 1e-4).
"use strict";
const fs = require("fs");
const path = require("path");

// The .npy files nabla writes: format 1.0, little-endian, C order.
const DTYPES = {"<f4": [Float32Array, "float32"], "<i8": [BigInt64Array, "int64"], "<f8": [Float64Array, "float64"],
                "<i4": [Int32Array, "int32"]};
function readNpy(file) {
    const buf = fs.readFileSync(file);
    if (buf.toString("latin1", 1, 6) !== "NUMPY" || buf[6] !== 1) throw new Error(file + ": not a .npy file of format 1.0");
    const len = buf.readUInt16LE(8);
    const header = buf.toString("latin1", 10, 10 + len);
    const descr = /'descr': *'([^']+)'/.exec(header)[1];
    if (/'fortran_order': *True/.test(header)) throw new Error(file + ": Fortran order");
    const dims = /'shape': *\(([^)]*)\)/.exec(header)[1].split(",").filter(s => s.trim()).map(Number);
    if (!DTYPES[descr]) throw new Error(file + ": dtype " + descr);
    const [Ctor, type] = DTYPES[descr];
    const data = buf.subarray(10 + len);
    const copy = new Ctor(data.byteLength / Ctor.BYTES_PER_ELEMENT);
    new Uint8Array(copy.buffer).set(data);
    return {type, data: copy, dims};
}

async function main() {
    const [moduleDir, model, dir, tolArg] = process.argv.slice(2);
    const ort = require(path.join(moduleDir, "node_modules", "onnxruntime-node"));
    const tol = tolArg ? Number(tolArg) : 1e-4;
    const session = await ort.InferenceSession.create(model);
    const feeds = {};
    session.inputNames.forEach((name, i) => {
        const a = readNpy(path.join(dir, "in" + i + ".npy"));
        feeds[name] = new ort.Tensor(a.type, a.data, a.dims);
    });
    const results = await session.run(feeds);
    let worst = 0;
    session.outputNames.forEach((name, j) => {
        const want = readNpy(path.join(dir, "nabla_out" + j + ".npy"));
        const got = results[name];
        if (got.dims.join(",") !== want.dims.join(","))
            throw new Error(`output ${name}: shape [${got.dims}] in ONNX Runtime, nabla's [${want.dims}]`);
        let scale = 1;
        for (const v of want.data) scale = Math.max(scale, Math.abs(Number(v)));
        for (let k = 0; k < want.data.length; k++) {
            const d = Math.abs(Number(got.data[k]) - Number(want.data[k])) / scale;
            if (!(d <= worst)) worst = d;
        }
    });
    console.log(`${path.basename(model)}: ONNX Runtime ${ort.env.versions ? ort.env.versions.common || "" : ""} ` +
                `gives nabla's outputs to ${worst.toPrecision(2)} (tolerance ${tol})`);
    process.exit(worst <= tol ? 0 : 1);
}
main().catch(e => { console.error("onnx_ort: " + e.message); process.exit(1); });
