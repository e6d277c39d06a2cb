#pragma once
// Reading PyTorch's torch.save files (PyTorch >= 1.6, the zip format):
//   <name>/data.pkl     the pickled object (protocol 2), storages as persistent ids
//   <name>/data/<key>   each storage's raw bytes
//   <name>/byteorder    "little" or "big" (absent in files before PyTorch 1.10: little)
//   <name>/version      the format version ("3")
// through libzip and the restricted unpickler of io/torch_pickle.h. Nothing in the file is
// executed, no file is written, and nothing is allocated beyond TorchReadOptions::max_bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/io/torch_tensors.h>
#include <tapegrad/layers/state_dict.h>

namespace tapegrad::io {

/// True when `data` starts as a legacy torch.save file does (PyTorch < 1.6, or saved with
/// _use_new_zipfile_serialization=False): a protocol-2 pickle of the magic number
/// 0x1950a86a20f9469cfc6c. Such files are not read; the readers name them.
bool is_legacy_torch_save(const std::uint8_t* data, std::size_t size);
/// The error for a legacy file: "a legacy torch.save file (PyTorch < 1.6 format) ...; re-save
/// it with torch.save(obj, path, _use_new_zipfile_serialization=True)".
extern const char* const kLegacyTorchSaveMessage;

/// Parses a torch.save archive held in memory (a fuzzing entry point) into its state dict.
/// Throws std::runtime_error naming the problem: not a zip archive (a legacy torch.save
/// file by name), a damaged or truncated
/// archive (libzip's message), an entry name that is absolute, holds "..", a backslash or a
/// second top-level folder, a duplicate name, an encrypted entry or a compression other than
/// stored / deflate, no data.pkl, a byteorder other than little / big, a record whose size
/// is not what its storage declares, a record that inflates beyond its declared size (a zip
/// bomb) or past max_bytes, and everything torch_state_dict and unpickle_torch refuse.
/// `converted`, when given, receives a line per tensor whose dtype was converted.
layers::StateDict parse_torch_archive(const std::uint8_t* data, std::size_t size, const TorchReadOptions& options = {},
                                      std::vector<std::string>* converted = nullptr);

/// Reads the torch.save file at `path` (opened in place, not read into memory first).
/// Throws std::runtime_error naming the path and the problem, as parse_torch_archive.
layers::StateDict read_torch_file(const std::string& path, const TorchReadOptions& options = {},
                                  std::vector<std::string>* converted = nullptr);

}  // namespace tapegrad::io
