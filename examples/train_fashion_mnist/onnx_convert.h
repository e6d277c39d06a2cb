#pragma once
// Checkpoints of train_fashion_mnist as ONNX models: `tapegrad_convert onnx CHECKPOINT OUT.onnx`.
// The trainer's code (it rebuilds the trainer's model from its metadata), not the library's:
// io/onnx_export.h is the library's ONNX writer.
#include <memory>
#include <string>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/layers/sequential.h>

namespace fmnist {

/// What convert_checkpoint_to_onnx does to the model on the way.
struct OnnxConvertOptions {
  /// Fold each BatchNorm into the Linear/Conv2d before it (layers/fuse_batch_norm.h) first.
  bool fuse_batch_norm = false;
  /// Put the checkpoint's standardisation (x − preprocess.mean)/preprocess.std at the start
  /// of the graph, so the model takes pixels / 255; false: the model takes standardised
  /// input and the metadata says how to make it.
  bool fold_preprocessing = true;
};

/// The model a Fashion-MNIST training checkpoint describes (safetensors with the metadata
/// `fmnist.model` (mlp | cnn; absent: mlp), `fmnist.hidden`, `fmnist.norm`,
/// `fmnist.dropout`, `fmnist.cnn.channels`, `fmnist.cnn.head`, `fmnist.cnn.groups`, as
/// train_fashion_mnist writes them), built as the trainer builds it for 784 pixels and 10
/// classes (an MLP, or Sequential(Unflatten(1, {1, 28, 28}), CNN)), with the tensors whose keys
/// start with "model." loaded strictly, in eval mode. Throws std::invalid_argument naming the key and
/// the value when the metadata is missing or malformed, and load_state_dict's error when the
/// tensors do not fit.
std::shared_ptr<tapegrad::layers::Sequential> model_from_fmnist_checkpoint(const tapegrad::SafetensorsContent& checkpoint,
                                                                           const std::string& path);

/// Reads `checkpoint`, rebuilds its model (model_from_fmnist_checkpoint), optionally fuses
/// BatchNorm, and writes it to `out` as ONNX (export_onnx) with input "input" (N, 784) and
/// output "output" (N, 10) logits, and the checkpoint's fmnist.* keys plus "preprocess"
/// (what the input must be) as model metadata. Returns a one-line summary. Throws
/// std::invalid_argument for a checkpoint without architecture or preprocessing metadata
/// (fold_preprocessing needs preprocess.mean / preprocess.std), std::runtime_error when a
/// file cannot be read or written (nothing is written then).
std::string convert_checkpoint_to_onnx(const std::string& checkpoint, const std::string& out,
                                       const OnnxConvertOptions& options = {});

}  // namespace fmnist
