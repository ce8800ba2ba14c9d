#!/usr/bin/env bash
# nabla and NumPy read each other's .npy and .npz files: NumPy writes every
# dtype nabla reads (float16, the narrow integers, Fortran order, 0-d and
# empty arrays, numpy.savez and numpy.savez_compressed), `nabla npy` prints
# them and must print exactly NumPy's values; `nabla npy -o` writes them
# again, NumPy reads those back and compares, and for nabla's own dtypes the
# .npy bytes must be numpy.save's, byte for byte.
#   tests/test_npy_numpy.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "skipped: Debian's python3 with NumPy is not installed (apt-get install python3-numpy)"
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" - "$build/nabla" "$out" <<'PYEOF'
import math, os, subprocess, sys
import numpy as np

nabla, out = sys.argv[1], sys.argv[2]
failures = 0
passed = 0

def fail(msg):
    global failures
    failures += 1
    print("FAIL: " + msg)

# What nabla loads each dtype as.
loaded = {'f4': np.float32, 'f2': np.float32, 'f8': np.float64, 'i4': np.int32, 'i1': np.int32, 'i2': np.int32,
          'u2': np.int32, 'i8': np.int64, 'u4': np.int64, 'u1': np.uint8, 'b1': np.bool_}
names = {np.float32: 'float32', np.float64: 'float64', np.int32: 'int32', np.int64: 'int64', np.uint8: 'uint8',
         np.bool_: 'bool'}

def expected_text(name, a):
    t = loaded[a.dtype.str[1:]]
    b = np.array(a, order='C').astype(t)
    shape = '[' + ', '.join(str(d) for d in b.shape) + ']'
    vals = []
    for v in b.ravel(order='C'):
        if t in (np.float32, np.float64):
            v = float(v)
            vals.append('nan' if math.isnan(v) else ('%.9g' if t == np.float32 else '%.17g') % v)
        else:
            vals.append(str(int(v)))
    return '%s %s %s\n%s\n' % (name, names[t], shape, ' '.join(vals))

rng = np.random.default_rng(7)
arrays = {
    'f4': rng.standard_normal((3, 4)).astype(np.float32),
    'f8': np.array([0.1, -1e300, 2.5, np.inf, -0.0]),
    'i4': np.array([[-7, 0], [2147483647, -2147483648]], np.int32),
    'i8': np.array([9223372036854775807, -9223372036854775808, 3], np.int64),
    'u1': np.array([0, 1, 200, 255], np.uint8),
    'b1': np.array([[True, False, True]]),
    'f2': np.array([1, -2, 65504, 2**-24, 1023 * 2**-24, 2**-14, np.inf, -np.inf, np.nan, 0.3333], np.float16),
    'i1': np.array([-128, 127, 0], np.int8),
    'i2': np.array([-32768, 32767], np.int16),
    'u2': np.array([0, 65535], np.uint16),
    'u4': np.array([0, 4294967295], np.uint32),
    'scalar': np.array(3.25),
    'empty': np.zeros((0, 3), np.float32),
    'fortran': np.asfortranarray(rng.standard_normal((2, 3, 4))),
    'fortran_i2': np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),
    'cube': rng.integers(-1000, 1000, (2, 3, 2)).astype(np.int64),
}

def run(args):
    r = subprocess.run([nabla, 'npy'] + args, capture_output=True, text=True)
    if r.returncode:
        fail('nabla npy %s: %s' % (' '.join(args), r.stderr.strip()))
        return None
    return r.stdout

def same(a, b):
    return a.shape == b.shape and np.array_equal(a.astype(b.dtype), b, equal_nan=b.dtype.kind == 'f')

# NumPy writes .npy files, nabla reads them (and writes them back).
for key, a in arrays.items():
    src, back = os.path.join(out, key + '.npy'), os.path.join(out, key + '.back.npy')
    np.save(src, a)
    got = run([src, '-o', back])
    if got is None:
        continue
    if a.flags.f_contiguous and a.ndim > 1 and not a.flags.c_contiguous:
        with open(src, 'rb') as f:
            if b"'fortran_order': True" not in f.read(128):
                fail('%s: numpy did not write Fortran order' % key)
    if got != expected_text('-', a):
        fail('%s: nabla printed\n%s\nNumPy has\n%s' % (key, got, expected_text('-', a)))
        continue
    b = np.load(back)
    if not same(a, b) or b.dtype != loaded[a.dtype.str[1:]]:
        fail('%s: NumPy reads back %r (%s), wrote %r' % (key, b, b.dtype, a))
        continue
    if a.dtype.str[1:] in ('f4', 'f8', 'i4', 'i8', 'u1', 'b1'):
        ref = os.path.join(out, key + '.ref.npy')
        np.save(ref, np.array(a, order='C'))
        if open(ref, 'rb').read() != open(back, 'rb').read():
            fail('%s: nabla\'s .npy bytes differ from numpy.save\'s' % key)
            continue
    passed += 1

# numpy.savez and numpy.savez_compressed, and nabla writing both ways.
for save, compress in ((np.savez, False), (np.savez_compressed, True)):
    src = os.path.join(out, 'all%d.npz' % compress)
    back = os.path.join(out, 'all%d.back.npz' % compress)
    save(src, **arrays)
    got = run([src, '-o', back] + (['--compress'] if compress else []))
    if got is None:
        continue
    want = ''.join(expected_text(k, a) for k, a in arrays.items())
    if got != want:
        fail('%s: nabla printed\n%s\nNumPy has\n%s' % (save.__name__, got, want))
        continue
    with np.load(back) as z:
        if list(z.keys()) != list(arrays.keys()):
            fail('%s: NumPy reads the names %s' % (back, list(z.keys())))
        for k, a in arrays.items():
            if not same(a, z[k]):
                fail('%s: member %s reads back as %r' % (back, k, z[k]))
    import zipfile
    with zipfile.ZipFile(back) as zf:
        bad = zf.testzip()
        if bad:
            fail('%s: zipfile finds %s damaged' % (back, bad))
        kinds = {i.compress_type for i in zf.infolist()}
        if kinds != {zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED}:
            fail('%s: compression %s' % (back, kinds))
    passed += 1

# NumPy refuses nothing nabla reads; nabla refuses what it does not read.
for key, a in (('big_endian', np.array([1, 2], '>f4')), ('complex', np.array([1j])), ('u8', np.array([1], np.uint64))):
    src = os.path.join(out, key + '.npy')
    np.save(src, a)
    r = subprocess.run([nabla, 'npy', src], capture_output=True, text=True)
    if r.returncode != 1 or 'nabla does not read' not in r.stderr:
        fail('%s: nabla gave %d: %s' % (key, r.returncode, r.stderr.strip()))
    else:
        passed += 1

print('%d passed, %d failed' % (passed, failures))
sys.exit(1 if failures else 0)
PYEOF
