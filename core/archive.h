#pragma once
// Archive: the one in-memory form of a tapegrad checkpoint, as libtorch's
// serialize::OutputArchive / InputArchive. Named tensors in the order they were written plus
// string metadata; each part of a program writes its state under its own key prefix
// ("model.", "optimizer.", "scheduler.") with its save_to, and reads it back with its
// load_from, from one archive that was read from disk once.
//
//   Archive a;
//   model.save_to(a, "model.");
//   optimizer.save_to(a, "optimizer.");
//   a.set_metadata("format", "my-checkpoint");
//   a.save("run.safetensors");                    // atomic (core/file_io.h)
//
//   const Archive b = Archive::load("run.safetensors");  // the file is read once
//   model.load_from(b, {}, "model.");
//   optimizer.load_from(b, "optimizer.");
//
// On disk an archive is a safetensors file (core/safetensors.h), checksummed per tensor.
// Keys under kArchiveExtraPrefix ("extra/") are an application's own tensors: with_prefix("")
// leaves them out, extras() returns them.
#include <map>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// Prefix under which an archive stores an application's own tensors ("extra/x").
inline constexpr const char* kArchiveExtraPrefix = "extra/";

/// Named tensors (in write order) and string metadata; see the top of this header.
class Archive {
 public:
  /// An empty archive (to write into).
  Archive() = default;
  /// The content of a parsed file; `source` (its path) names it in error messages.
  explicit Archive(SafetensorsContent content, std::string source = "");

  // ---- writing -------------------------------------------------------------------------
  /// Adds `tensor` under `key` (the live handle: the data is read when the archive is saved).
  /// Throws std::invalid_argument naming the key for an empty key, a key already present,
  /// the reserved "__metadata__" or an undefined tensor.
  void write(const std::string& key, const Tensor& tensor);
  /// write() of every (key, tensor) with `prefix` prepended, in order.
  void write_all(const std::string& prefix, const std::vector<std::pair<std::string, Tensor>>& tensors);
  /// Sets the metadata string `key` (replacing an earlier value).
  void set_metadata(const std::string& key, const std::string& value);

  // ---- reading -------------------------------------------------------------------------
  /// The tensor `key`, or nullptr.
  const Tensor* find(const std::string& key) const;
  /// The tensors whose key starts with `prefix`, prefix removed, in order. An empty prefix
  /// gives every tensor except the extras (kArchiveExtraPrefix).
  std::vector<std::pair<std::string, Tensor>> with_prefix(const std::string& prefix) const;
  /// The extras: with_prefix(kArchiveExtraPrefix).
  std::vector<std::pair<std::string, Tensor>> extras() const { return with_prefix(kArchiveExtraPrefix); }
  /// The metadata string `key`, or `fallback` when it is absent.
  std::string metadata(const std::string& key, const std::string& fallback = "") const;
  /// true when the metadata string `key` is present.
  bool has_metadata(const std::string& key) const { return content_.metadata.count(key) > 0; }
  /// Every tensor, in order.
  const std::vector<std::pair<std::string, Tensor>>& tensors() const { return content_.tensors; }
  /// Every metadata string.
  const std::map<std::string, std::string>& metadata() const { return content_.metadata; }
  /// The path the archive was read from ("" when built in memory).
  const std::string& source() const { return source_; }

  // ---- files ---------------------------------------------------------------------------
  /// Writes the archive to `path` as a safetensors file, atomically (save_safetensors: a
  /// failed save leaves the old file intact). Throws std::runtime_error naming the path.
  void save(const std::string& path) const;
  /// Reads `path` once (load_safetensors: every problem of a truncated, corrupted or
  /// hostile file is a std::runtime_error naming the path, the problem and its offset).
  static Archive load(const std::string& path);

 private:
  SafetensorsContent content_;
  std::string source_;
  std::unordered_set<std::string> written_;  // every key held (duplicates refused in O(1))
};

}  // namespace tapegrad
