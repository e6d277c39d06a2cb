#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/ (valid files plus a few near-misses).

Usage: python3 fuzz/make_corpus.py   (from the repository root or from fuzz/)
"""
import json
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))


def write(kind, name, data):
    d = os.path.join(here, "corpus", kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- IDX: 0x00 0x00 <type> <ndims>, ndims big-endian uint32 sizes, big-endian values ----
def idx(type_code, dims, fmt, values):
    head = bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    return head + b"".join(struct.pack(">" + fmt, v) for v in values)


write("idx", "uint8_2x3", idx(0x08, [2, 3], "B", [0, 1, 2, 127, 128, 255]))
write("idx", "images_2x4x4", idx(0x08, [2, 4, 4], "B", list(range(32))))
write("idx", "labels_5", idx(0x08, [5], "B", [0, 9, 3, 3, 1]))
write("idx", "int8_4", idx(0x09, [4], "b", [-128, -1, 0, 127]))
write("idx", "int16_2", idx(0x0B, [2], "h", [-300, 300]))
write("idx", "int32_3", idx(0x0C, [3], "i", [-70000, 0, 70000]))
write("idx", "float32_2x2", idx(0x0D, [2, 2], "f", [0.5, -1.25, 3.0, 1e-3]))
write("idx", "float64_1", idx(0x0E, [1], "d", [3.141592653589793]))
write("idx", "empty_0x3", idx(0x08, [0, 3], "B", []))
write("idx", "truncated", idx(0x08, [2, 3], "B", [1, 2, 3]))


# ---- safetensors: u64 LE header length, JSON header, raw little-endian data ----
def safetensors(tensors, metadata=None):
    header, blob = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + blob


f32 = lambda *v: struct.pack("<%df" % len(v), *v)
f64 = lambda *v: struct.pack("<%dd" % len(v), *v)
i64 = lambda *v: struct.pack("<%dq" % len(v), *v)

write("safetensors", "linear_bn", safetensors([
    ("0.weight", "F32", [2, 2], f32(0.5, -0.5, 1.0, 2.0)),
    ("0.bias", "F32", [2], f32(0.0, 0.1)),
    ("1.running_mean", "F32", [2], f32(0.0, 0.0)),
    ("1.running_var", "F32", [2], f32(1.0, 1.0)),
    ("1.num_batches_tracked", "I64", [], i64(3)),
], {"format": "pt"}))
write("safetensors", "f64_scalar", safetensors([("x", "F64", [], f64(2.5))]))
write("safetensors", "empty_tensor", safetensors([("e", "F32", [0, 3], b"")]))
write("safetensors", "no_tensors", safetensors([], {"k": "v"}))
write("safetensors", "bad_offsets", safetensors([("w", "F32", [2], f32(1.0))]))
write("safetensors", "short", b"\x08\x00\x00")

# ---- torch.save: the small PyTorch-written fixtures (tests/fixtures/torch) and their pickles ----
import zipfile  # noqa: E402

torch_fixtures = os.path.join(here, "..", "tests", "fixtures", "torch")
for name in ["views", "mlp_seq", "mlp_f16", "checkpoint", "hostile_global", "mlp_named"]:
    path = os.path.join(torch_fixtures, name + ".pt")
    with open(path, "rb") as f:
        write("torch_archive", name, f.read())
    with zipfile.ZipFile(path) as z:
        pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        write("torch_pickle", name, z.read(pkl))
write("torch_pickle", "self_list", b"\x80\x02]q\x00h\x00a.")  # a list that contains itself
# one memoized key shared by many dicts, a memoized persistent id loaded again (sharing, not copying)
write("torch_pickle", "shared_key", b"\x80\x02X\x03\x00\x00\x00keyq\x00" + b"}h\x00Ns0" * 8 + b".")
write("torch_pickle", "shared_pid",
      b"\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x01tq\x00"
      + b"h\x00Q0" * 4 + b".")
write("torch_archive", "legacy", open(os.path.join(torch_fixtures, "legacy.pt"), "rb").read())  # PyTorch < 1.6

# ---- CSV: first byte = options (bits 0-1 delimiter , ; \t |, bit 2 header, bit 3
# regression, bit 4 label column 0 instead of the last), then the text ----
def csv(options, text):
    return bytes([options]) + text.encode()


write("csv", "iris_header", csv(4, "sepal_length,sepal_width,species\n5.1,3.5,setosa\n7.0,3.2,versicolor\n6.3,3.3,virginica\n"))
write("csv", "int_labels_crlf", csv(4, "a,b,label\r\n1,2,0\r\n3,4,1\r\n-5.5e-3,+6,2\r\n"))
write("csv", "quoted", csv(4, '"x, first","y ""quoted""",label\n"1.5",2,"cat"\n3,"4",dog\n'))
write("csv", "no_header_semicolon", csv(1, "1;2;3\n4;5;6\n"))
write("csv", "regression_tab", csv(4 | 2 | 8, "x\ty\ttarget\n0.1\t0.2\t1.5\n0.3\t0.4\t-2.25\n"))
write("csv", "label_first_pipe", csv(4 | 3 | 16, "label|a|b\n1|2|3\n0|5|6\n"))
write("csv", "ragged", csv(4, "a,b,c\n1,2,3\n4,5\n"))
write("csv", "missing_value", csv(4, "a,b,c\n1,,3\n"))
write("csv", "blank_lines", csv(4, "a,b\n\n1,0\n\r\n2,1\n\n"))
write("csv", "unterminated", csv(4, 'a,b\n"1,0\n'))
