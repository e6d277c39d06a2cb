#pragma once
// Reshaping a state dict's keys so a checkpoint written by another program fits a module:
// strip a prefix (DataParallel's "module."), rename key paths by a map, and describe how two
// key sets differ in structure (named children vs Sequential indices, a prefix on one side).
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/layers/state_dict.h>

namespace tapegrad::layers {

/// PyTorch's torch.nn.modules.utils.consume_prefix_in_state_dict_if_present: every key that
/// starts with `prefix` loses it ("module.0.weight" -> "0.weight" for prefix "module."),
/// other keys are kept unchanged. Order is kept. Throws std::invalid_argument for an empty
/// prefix, or when stripping makes two keys equal (naming both).
StateDict strip_prefix(const StateDict& dict, const std::string& prefix);

/// One key-path rename: `from` -> `to`. A key equal to `from`, or starting with `from` + ".",
/// has that leading path replaced: {"fc1", "0"} turns "fc1.weight" into "0.weight";
/// {"features.0.weight", "0.weight"} renames one key. An empty `to` removes the path and its dot.
struct KeyRename {
  std::string from;  ///< the leading key path to replace
  std::string to;    ///< what replaces it (empty: remove the path and its dot)
};

/// Parses "OLD=NEW" (the converter's --rename). Throws std::invalid_argument naming the text
/// when there is no '=' or OLD is empty.
KeyRename parse_key_rename(const std::string& text);

/// Applies `renames` to every key (the first rule whose `from` matches a key wins). Order is
/// kept. Throws std::invalid_argument when a rule has an empty `from`, matches no key (a
/// typo would otherwise pass silently), or when two keys end up equal.
StateDict rename_keys(const StateDict& dict, const std::vector<KeyRename>& renames);

/// How `file_keys` differ from `model_keys` in structure, in one or two sentences, or "" when
/// nothing structural stands out. Recognised: a prefix on every key of one side only
/// ("every key in the file starts with 'module.' (DataParallel / DistributedDataParallel);
/// strip it: strip_prefix / --strip-prefix module."), and different top-level names ("the
/// file's keys use named children fc1, bn1, fc2; the model's are Sequential indices 0, 1, 3"),
/// with the renames that map one onto the other when both sides have the same number of
/// top-level entries holding the same leaf names in the same order ("rename fc1=0, bn1=1, fc2=3").
std::string describe_key_structure(const std::vector<std::string>& file_keys,
                                   const std::vector<std::string>& model_keys);

}  // namespace tapegrad::layers
