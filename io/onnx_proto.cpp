#include <tapegrad/io/onnx_proto.h>

#include <cstring>

namespace tapegrad::io::onnx_proto {

void Writer::varint(std::uint64_t v) {
  while (v >= 0x80) {
    buf_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  buf_.push_back(static_cast<char>(v));
}

void Writer::varint_field(int field, std::uint64_t v) {
  tag(field, 0);
  varint(v);
}

void Writer::float_field(int field, float v) {
  tag(field, 5);
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian hosts only (x86-64, aarch64), as the rest of tapegrad's file formats
  buf_.append(b, 4);
}

void Writer::bytes_field(int field, const std::string& b) {
  tag(field, 2);
  varint(b.size());
  buf_ += b;
}

namespace {

// onnx.proto field numbers
Writer tensor(const TensorData& t) {
  Writer w;
  for (auto d : t.dims) w.int64_field(1, d);  // dims
  w.int64_field(2, t.data_type);              // data_type
  w.bytes_field(8, t.name);                   // name
  w.bytes_field(9, t.raw);                    // raw_data
  return w;
}

Writer attribute(const Attribute& a) {
  Writer w;
  w.bytes_field(1, a.name);
  switch (a.kind) {
    case Attribute::Float: w.float_field(2, a.f); break;
    case Attribute::Int: w.int64_field(3, a.i); break;
    case Attribute::Ints:
      for (auto v : a.ints) w.int64_field(8, v);
      break;
  }
  w.int64_field(20, a.kind);  // type (AttributeProto.AttributeType has the same numbers)
  return w;
}

Writer node(const Node& n) {
  Writer w;
  for (const auto& i : n.inputs) w.bytes_field(1, i);
  for (const auto& o : n.outputs) w.bytes_field(2, o);
  w.bytes_field(3, n.name);
  w.bytes_field(4, n.op_type);
  for (const auto& a : n.attributes) w.message_field(5, attribute(a));
  return w;
}

Writer value_info(const ValueInfo& v) {
  Writer shape;
  for (auto d : v.dims) {
    Writer dim;
    if (d < 0) dim.bytes_field(2, v.dim_param);  // dim_param
    else dim.int64_field(1, d);                  // dim_value
    shape.message_field(1, dim);
  }
  Writer tensor_type;
  tensor_type.int64_field(1, v.elem_type);
  tensor_type.message_field(2, shape);
  Writer type;
  type.message_field(1, tensor_type);
  Writer w;
  w.bytes_field(1, v.name);
  w.message_field(2, type);
  return w;
}

}  // namespace

std::string encode(const Model& m) {
  Writer g;
  for (const auto& n : m.nodes) g.message_field(1, node(n));
  g.bytes_field(2, m.graph_name);
  for (const auto& t : m.initializers) g.message_field(5, tensor(t));
  for (const auto& v : m.inputs) g.message_field(11, value_info(v));
  for (const auto& v : m.outputs) g.message_field(12, value_info(v));

  Writer model;
  model.int64_field(1, m.ir_version);
  model.bytes_field(2, m.producer_name);
  if (!m.producer_version.empty()) model.bytes_field(3, m.producer_version);
  if (!m.doc_string.empty()) model.bytes_field(6, m.doc_string);
  model.message_field(7, g);
  Writer opset;
  opset.bytes_field(1, "");  // the default domain ai.onnx
  opset.int64_field(2, m.opset);
  model.message_field(8, opset);
  for (const auto& [k, v] : m.metadata) {
    Writer e;
    e.bytes_field(1, k);
    e.bytes_field(2, v);
    model.message_field(14, e);
  }
  return model.bytes();
}

}  // namespace tapegrad::io::onnx_proto
