// Interop with NumPy and the standard json module, in both directions: python3
// reads the safetensors / .npy / .npz files ms wrote (the safetensors header
// with `json`, the data with numpy.frombuffer) and checks every value; python3
// writes safetensors by hand (struct + json) and .npy / .npz with numpy.save,
// savez, savez_compressed, and ms checks what it loads. Skipped (with a message)
// when no python3 with NumPy is found.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <ms/io/npy.hpp>
#include <ms/io/safetensors.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io_test_util.hpp"

using namespace ms;
using namespace io_test;

namespace {

// The python side; `pattern` mirrors io_test::pattern_value.
constexpr const char* kScript = R"PY(
import json, os, struct, sys
import numpy as np

mode, d = sys.argv[1], sys.argv[2]
ST = {'BOOL': '|b1', 'U8': '|u1', 'I8': '|i1', 'I16': '<i2', 'U16': '<u2', 'F16': '<f2',
      'I32': '<i4', 'U32': '<u4', 'F32': '<f4', 'F64': '<f8', 'I64': '<i8', 'U64': '<u8',
      'C64': '<c8'}
NPY = ['b1', 'i1', 'i2', 'i4', 'i8', 'u1', 'u2', 'u4', 'u8', 'f2', 'f4', 'f8', 'c8', 'c16']

def pattern(shape, kind):
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n, dtype=np.int64)
    base = (i * 7) % 23
    if kind == 'b':
        v = i % 3 == 0
    elif kind == 'u':
        v = base
    elif kind == 'i':
        v = base - 11
    elif kind == 'f':
        v = (base - 11) * 0.25
    else:
        v = (base - 11) * 0.25 + 1j * ((((i + 5) * 7) % 23 - 11) * 0.25)
    return v.reshape(shape)

failures = []
def check(what, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        failures.append(what)
        print('MISMATCH', what, got.dtype, want.dtype, got.shape, want.shape, got.ravel()[:6],
              want.ravel()[:6])

def bf16_to_f32(buf):
    return (np.frombuffer(buf, dtype='<u2').astype('<u4') << 16).view('<f4')

if mode == 'check':
    raw = open(os.path.join(d, 'ms.safetensors'), 'rb').read()
    (n,) = struct.unpack('<Q', raw[:8])
    assert n % 8 == 0, 'header not padded to 8 bytes'
    header = json.loads(raw[8:8 + n].decode('utf-8'))
    data = raw[8 + n:]
    assert header.pop('__metadata__') == {'framework': 'ms', 'note': 'interop'}
    spans = sorted(tuple(info['data_offsets']) for info in header.values())
    pos = 0
    for b, e in spans:
        assert b == pos, 'data offsets do not tile the data'
        pos = e
    assert pos == len(data), 'trailing data'
    assert len(header) == 2 * len(ST) + 3, sorted(header)
    for name, info in header.items():
        b, e = info['data_offsets']
        shape = tuple(info['shape'])
        dt = info['dtype']
        if dt == 'BF16':
            got = bf16_to_f32(data[b:e]).reshape(shape)
            want = pattern(shape, 'f').astype('<f4')
        else:
            got = np.frombuffer(data[b:e], dtype=ST[dt]).reshape(shape)
            want = pattern(shape, np.dtype(ST[dt]).kind).astype(ST[dt])
        if name == 'transposed':  # a [5, 3] view of a [3, 5] pattern
            want = pattern((3, 5), 'f').astype('<f4').T
        check('safetensors ' + name, got, want)
    for code in NPY:
        a = np.load(os.path.join(d, 'ms_' + code + '.npy'))
        dt = np.dtype('<' + code)
        check('npy ' + code, a, pattern((3, 5), dt.kind).astype(dt))
    s = np.load(os.path.join(d, 'ms_scalar.npy'))
    check('npy scalar', s, pattern((), 'f').astype('<f8'))
    for z in ['ms_stored.npz', 'ms_deflate.npz']:
        with np.load(os.path.join(d, z)) as f:
            assert f.files == ['w', 'b', 'empty'], f.files
            check(z + ' w', f['w'], pattern((4, 3), 'f').astype('<f4'))
            check(z + ' b', f['b'], pattern((3,), 'i').astype('<i8'))
            check(z + ' empty', f['empty'], pattern((0, 2), 'f').astype('<f2'))
elif mode == 'write':
    header, blobs, pos = {'__metadata__': {'writer': 'python'}}, [], 0
    for dt, code in ST.items():
        want = pattern((2, 3), np.dtype(code).kind).astype(code)
        blob = want.tobytes()
        header['x_' + dt] = {'dtype': dt, 'shape': [2, 3], 'data_offsets': [pos, pos + len(blob)]}
        blobs.append(blob)
        pos += len(blob)
    f32 = pattern((2, 3), 'f').astype('<f4')
    blob = (f32.view('<u4') >> 16).astype('<u2').tobytes()  # exact: the values fit bfloat16
    header['x_BF16'] = {'dtype': 'BF16', 'shape': [2, 3], 'data_offsets': [pos, pos + len(blob)]}
    blobs.append(blob)
    text = json.dumps(header).encode('utf-8')
    text += b' ' * ((8 - len(text) % 8) % 8)
    with open(os.path.join(d, 'py.safetensors'), 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))
    for code in NPY:
        dt = np.dtype('<' + code)
        np.save(os.path.join(d, 'py_' + code + '.npy'), pattern((3, 5), dt.kind).astype(dt))
    np.save(os.path.join(d, 'py_fortran.npy'), np.asfortranarray(pattern((3, 4, 5), 'i').astype('<i4')))
    np.save(os.path.join(d, 'py_bigendian.npy'), pattern((3, 5), 'f').astype('>f8'))
    np.save(os.path.join(d, 'py_bigendian_c.npy'), pattern((3, 5), 'c').astype('>c8'))
    np.save(os.path.join(d, 'py_scalar.npy'), pattern((), 'i').astype('<i2'))
    arrays = dict(w=pattern((4, 3), 'f').astype('<f4'), b=pattern((3,), 'i').astype('<i8'),
                  e=pattern((0, 2), 'u').astype('<u1'))
    np.savez(os.path.join(d, 'py.npz'), **arrays)
    np.savez_compressed(os.path.join(d, 'pyc.npz'), **arrays)
    np.savez(os.path.join(d, 'py_positional.npz'), arrays['w'], arrays['b'])
if failures:
    print('FAILED:', failures)
    sys.exit(1)
print('python side OK:', mode)
)PY";

/// A python3 that has NumPy, or nullopt.
std::optional<std::string> python_with_numpy() {
  for (const std::string py : {"python3", "/usr/bin/python3"}) {
    const std::string cmd = py + " -c 'import numpy' > /dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return std::nullopt;
}

int run_python(const std::string& py, const TempDir& dir, const std::string& mode) {
  write_all(dir.file("interop.py"), bytes_of(kScript));
  const std::string cmd =
      py + " '" + dir.file("interop.py") + "' " + mode + " '" + dir.path.string() + "'";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::vector<std::pair<std::string, DType>> kSt = {
    {"BOOL", bool_},  {"U8", uint8},   {"I8", int8},      {"I16", int16},   {"U16", uint16},
    {"F16", float16}, {"I32", int32},  {"U32", uint32},   {"F32", float32}, {"F64", float64},
    {"I64", int64},   {"U64", uint64}, {"C64", complex64}};

const std::vector<std::pair<std::string, DType>> kNpy = {
    {"b1", bool_},   {"i1", int8},    {"i2", int16},     {"i4", int32},      {"i8", int64},
    {"u1", uint8},   {"u2", uint16},  {"u4", uint32},    {"u8", uint64},     {"f2", float16},
    {"f4", float32}, {"f8", float64}, {"c8", complex64}, {"c16", complex128}};

}  // namespace

TEST_SUITE("io") {
  TEST_CASE("interop: NumPy and json read the files ms writes") {
    const auto py = python_with_numpy();
    if (!py) {
      MESSAGE("skipped: no python3 with NumPy (python3 -c 'import numpy' failed)");
      return;
    }
    TempDir dir;
    io::NamedTensors st;
    for (const auto& [name, t] : kSt) {
      st.emplace_back("x_" + name, pattern({3, 5}, t));
      st.emplace_back("s_" + name, pattern({}, t));  // 0-d
    }
    st.emplace_back("e_BF16", pattern({0, 3}, bfloat16));
    st.emplace_back("b_BF16", pattern({2, 2}, bfloat16));
    st.emplace_back("transposed", pattern({3, 5}, float32).transpose(0, 1));
    io::save_safetensors(dir.file("ms.safetensors"), st,
                         {{"framework", "ms"}, {"note", "interop"}});
    for (const auto& [code, t] : kNpy)
      io::save_npy(dir.file("ms_" + code + ".npy"), pattern({3, 5}, t));
    io::save_npy(dir.file("ms_scalar.npy"), pattern({}, float64));
    const io::NamedTensors z = {{"w", pattern({4, 3}, float32)},
                                {"b", pattern({3}, int64)},
                                {"empty", pattern({0, 2}, float16)}};
    io::save_npz(dir.file("ms_stored.npz"), z);
    io::save_npz(dir.file("ms_deflate.npz"), z, io::NpzCompression::Deflate);
    CHECK(run_python(*py, dir, "check") == 0);
  }

  TEST_CASE("interop: ms reads what NumPy and json write") {
    const auto py = python_with_numpy();
    if (!py) {
      MESSAGE("skipped: no python3 with NumPy (python3 -c 'import numpy' failed)");
      return;
    }
    TempDir dir;
    REQUIRE(run_python(*py, dir, "write") == 0);

    const io::SafetensorsFile f = io::load_safetensors(dir.file("py.safetensors"));
    CHECK(f.metadata == std::map<std::string, std::string>{{"writer", "python"}});
    CHECK(f.tensors.size() == kSt.size() + 1);
    for (const auto& [name, t] : kSt) {
      CAPTURE(name);
      CHECK(same_tensor(f.at("x_" + name), pattern({2, 3}, t)));
    }
    CHECK(same_tensor(f.at("x_BF16"), pattern({2, 3}, bfloat16)));

    for (const auto& [code, t] : kNpy) {
      CAPTURE(code);
      CHECK(same_tensor(io::load_npy(dir.file("py_" + code + ".npy")), pattern({3, 5}, t)));
    }
    CHECK(same_tensor(io::load_npy(dir.file("py_fortran.npy")), pattern({3, 4, 5}, int32)));
    CHECK(same_tensor(io::load_npy(dir.file("py_bigendian.npy")), pattern({3, 5}, float64)));
    CHECK(same_tensor(io::load_npy(dir.file("py_bigendian_c.npy")), pattern({3, 5}, complex64)));
    CHECK(same_tensor(io::load_npy(dir.file("py_scalar.npy")), pattern({}, int16)));

    for (const std::string name : {"py.npz", "pyc.npz"}) {
      CAPTURE(name);
      const io::NamedTensors z = io::load_npz(dir.file(name));
      REQUIRE(z.size() == 3);
      CHECK(z[0].first == "w");
      CHECK(same_tensor(z[0].second, pattern({4, 3}, float32)));
      CHECK(z[1].first == "b");
      CHECK(same_tensor(z[1].second, pattern({3}, int64)));
      CHECK(z[2].first == "e");
      CHECK(same_tensor(z[2].second, pattern({0, 2}, uint8)));
    }
    const io::NamedTensors p = io::load_npz(dir.file("py_positional.npz"));
    REQUIRE(p.size() == 2);
    CHECK(p[0].first == "arr_0");
    CHECK(p[1].first == "arr_1");
  }
}
