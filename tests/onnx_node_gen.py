"""Writes ONNX's backend node tests (the conformance suite's single-op
models, generated from the installed onnx package's case generators) into
OUT, for tests/onnx_node_run.c:

  OUT/cases.tsv         one line a case: name, op type, opset, then its
                        inputs and outputs as name:dtype (dtype "-" for a
                        value that is not a tensor, which is not written)
  OUT/NAME/model.onnx   the model
  OUT/NAME/in_K.npy     input K, out_K.npy output K (NumPy files)

Debian's python3-onnx 1.12 predates NumPy 1.24, which removed the aliases
np.bool, np.object, ... that some generators still use: they are put back
in this process only."""
import os
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
for alias, builtin in (("bool", bool), ("object", object), ("int", int), ("float", float), ("str", str)):
    if alias not in np.__dict__:
        setattr(np, alias, builtin)

import onnx.backend.test.case.node as node_cases  # noqa: E402


def main(out):
    cases = node_cases.collect_testcases(None)
    # An "_expanded" case is its op's function body: it counts for that op.
    op_of = {c.name: c.model.graph.node[0].op_type for c in cases if not c.name.endswith("_expanded")}
    lines = []
    seen = set()
    for c in cases:
        # onnx 1.12 writes two cases as test_reduce_sum_negative_axes_keepdims_random:
        # each keeps a folder of its own.
        name = c.name
        while name in seen:
            name += "_again"
        seen.add(name)
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(c.model.SerializeToString())
        op = op_of.get(c.name[: -len("_expanded")] if c.name.endswith("_expanded") else c.name,
                       c.model.graph.node[0].op_type)
        opset = max((o.version for o in c.model.opset_import if o.domain in ("", "ai.onnx")), default=0)
        inputs, outputs = c.data_sets[0]
        fields = [name, op, str(opset)]
        for kind, values, infos in (("in", inputs, c.model.graph.input), ("out", outputs, c.model.graph.output)):
            cols = []
            for k, (v, info) in enumerate(zip(values, infos)):
                a = np.asarray(v) if isinstance(v, (np.ndarray, np.generic)) else None
                if a is None or a.dtype.kind not in "biuf":
                    cols.append(info.name + ":-")
                    continue
                np.save(os.path.join(d, "%s_%d.npy" % (kind, k)), a)
                cols.append("%s:%s" % (info.name, a.dtype.name))
            fields.append(" ".join(cols) if cols else ".")
        lines.append("\t".join(fields))
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %d node tests to %s" % (len(cases), out))


if __name__ == "__main__":
    main(sys.argv[1])
