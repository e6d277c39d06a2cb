#pragma once
// A minimal protocol-buffers encoder for the ONNX messages the exporter writes (ModelProto,
// GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto). Field numbers are
// onnx/onnx.proto's (ONNX 1.12, IR version 8). Only encoding: nothing here parses.
// Why not libonnx-dev + libprotobuf-dev: see docs/onnx.md (about 20 MiB of Debian packages
// and a generated-code build step for a format of which the exporter needs ~20 fields).
#include <cstdint>
#include <string>
#include <vector>

namespace tapegrad::io::onnx_proto {

/// Appends protobuf wire-format fields to a byte string.
class Writer {
 public:
  void varint_field(int field, std::uint64_t v);        ///< wire type 0 (int64 as two's complement)
  /// varint_field of a signed value (two's complement, as protobuf's int64).
  void int64_field(int field, std::int64_t v) { varint_field(field, static_cast<std::uint64_t>(v)); }
  void float_field(int field, float v);                 ///< wire type 5 (fixed32)
  void bytes_field(int field, const std::string& b);    ///< wire type 2
  /// A nested message: bytes_field with m's bytes.
  void message_field(int field, const Writer& m) { bytes_field(field, m.bytes()); }
  /// The encoded bytes so far.
  const std::string& bytes() const { return buf_; }

 private:
  void varint(std::uint64_t v);
  void tag(int field, int wire_type) { varint(static_cast<std::uint64_t>(field) << 3 | static_cast<unsigned>(wire_type)); }
  std::string buf_;
};

/// TensorProto.DataType values.
enum DataType : int { kFloat = 1, kInt64 = 7, kDouble = 11 };

/// An initializer: dims, data type and little-endian raw bytes.
struct TensorData {
  std::string name;               ///< the initializer's name (a state_dict key)
  std::vector<std::int64_t> dims;  ///< its shape
  int data_type = kFloat;          ///< a DataType value
  std::string raw;                 ///< raw_data
};

/// One attribute of a node (only the kinds the exporter uses).
struct Attribute {
  /// AttributeProto.AttributeType values of the kinds used.
  enum Kind { Float = 1, Int = 2, Ints = 7 };
  std::string name;               ///< the attribute's name ("epsilon", "kernel_shape", ...)
  Kind kind = Int;                 ///< which of f, i, ints holds the value
  float f = 0;                     ///< the value of a Float attribute
  std::int64_t i = 0;              ///< the value of an Int attribute
  std::vector<std::int64_t> ints;  ///< the values of an Ints attribute
  /// A Float attribute `n` = v.
  static Attribute of_float(std::string n, float v) { return {std::move(n), Float, v, 0, {}}; }
  /// An Int attribute `n` = v.
  static Attribute of_int(std::string n, std::int64_t v) { return {std::move(n), Int, 0, v, {}}; }
  /// An Ints attribute `n` = v.
  static Attribute of_ints(std::string n, std::vector<std::int64_t> v) { return {std::move(n), Ints, 0, 0, std::move(v)}; }
};

/// One NodeProto: an operator applied to named inputs, giving named outputs.
struct Node {
  ///@{
  /// The ONNX operator ("Gemm", "Conv", ...) and the node's name.
  std::string op_type, name;
  ///@}
  ///@{
  /// Names of the values it reads and writes.
  std::vector<std::string> inputs, outputs;
  ///@}
  std::vector<Attribute> attributes;  ///< the operator's attributes
};

/// A graph input or output: name, element type and shape; a dim < 0 is the symbolic dim
/// `dim_param` (the batch, "N").
struct ValueInfo {
  std::string name;                ///< the value's name
  int elem_type = kFloat;          ///< a DataType value
  std::vector<std::int64_t> dims;  ///< the shape; a dim < 0 is symbolic
  std::string dim_param = "N";     ///< the name of the symbolic dim
};

/// Everything encode() writes: the ModelProto with its one GraphProto.
struct Model {
  std::int64_t ir_version = 8;  ///< IR 8 goes with opset 17 (ONNX 1.12)
  std::int64_t opset = 17;      ///< the default domain's opset version
  ///@{
  /// ModelProto.producer_name, producer_version, GraphProto.name and ModelProto.doc_string.
  std::string producer_name = "tapegrad", producer_version, graph_name = "tapegrad", doc_string;
  ///@}
  std::vector<Node> nodes;               ///< the graph's nodes, in topological order
  std::vector<TensorData> initializers;  ///< the weights
  ///@{
  /// The graph's inputs and outputs.
  std::vector<ValueInfo> inputs, outputs;
  ///@}
  std::vector<std::pair<std::string, std::string>> metadata;  ///< metadata_props
};

/// The serialised ModelProto.
std::string encode(const Model& m);

}  // namespace tapegrad::io::onnx_proto
