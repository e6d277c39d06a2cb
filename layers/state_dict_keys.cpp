#include <tapegrad/layers/state_dict_keys.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <unordered_map>

namespace tapegrad::layers {

namespace {

std::string head_of(const std::string& key) { return key.substr(0, key.find('.')); }
std::string tail_of(const std::string& key) {
  const auto dot = key.find('.');
  return dot == std::string::npos ? std::string() : key.substr(dot + 1);
}

// Top-level names in first-appearance order, each with its keys' remainders.
std::vector<std::pair<std::string, std::vector<std::string>>> group_by_head(const std::vector<std::string>& keys) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const auto& k : keys) {
    const std::string h = head_of(k);
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == h; });
    if (it == groups.end()) {
      groups.emplace_back(h, std::vector<std::string>{});
      it = groups.end() - 1;
    }
    it->second.push_back(tail_of(k));
  }
  return groups;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

std::string list_names(const std::vector<std::string>& names, std::size_t limit = 8) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

std::string describe_heads(const std::vector<std::string>& heads) {
  const bool indices = std::all_of(heads.begin(), heads.end(), all_digits);
  return (indices ? "Sequential indices " : "named children ") + list_names(heads);
}

// The single top-level name every key shares (and that has something after it), or "".
std::string common_head(const std::vector<std::string>& keys) {
  if (keys.empty()) return "";
  const std::string h = head_of(keys.front());
  for (const auto& k : keys)
    if (k.find('.') == std::string::npos || head_of(k) != h) return "";
  return h;
}

}  // namespace

StateDict strip_prefix(const StateDict& dict, const std::string& prefix) {
  if (prefix.empty()) throw std::invalid_argument("strip_prefix: the prefix is empty");
  StateDict out;
  std::unordered_map<std::string, std::string> origin;  // new key -> the key it came from
  for (const auto& [key, t] : dict) {
    const bool has = key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0;
    const std::string k = has ? key.substr(prefix.size()) : key;
    if (auto [it, added] = origin.try_emplace(k, key); !added)
      throw std::invalid_argument("strip_prefix('" + prefix + "'): keys '" + it->second + "' and '" + key +
                                  "' both become '" + k + "'");
    out.insert(k, t);
  }
  return out;
}

KeyRename parse_key_rename(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw std::invalid_argument("rename: expected OLD=NEW with a non-empty OLD, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

StateDict rename_keys(const StateDict& dict, const std::vector<KeyRename>& renames) {
  std::vector<bool> used(renames.size(), false);
  for (const auto& r : renames)
    if (r.from.empty()) throw std::invalid_argument("rename_keys: a rename has an empty OLD name");
  StateDict out;
  std::unordered_map<std::string, std::string> origin;  // new key -> the key it came from
  for (const auto& [key, t] : dict) {
    std::string k = key;
    for (std::size_t i = 0; i < renames.size(); ++i) {
      const auto& r = renames[i];
      if (key == r.from) {
        k = r.to;
      } else if (key.size() > r.from.size() && key.compare(0, r.from.size(), r.from) == 0 &&
                 key[r.from.size()] == '.') {
        k = r.to.empty() ? key.substr(r.from.size() + 1) : r.to + key.substr(r.from.size());
      } else {
        continue;
      }
      used[i] = true;
      break;
    }
    if (k.empty()) throw std::invalid_argument("rename_keys: key '" + key + "' would become empty");
    if (auto [it, added] = origin.try_emplace(k, key); !added)
      throw std::invalid_argument("rename_keys: keys '" + it->second + "' and '" + key + "' both become '" + k + "'");
    out.insert(k, t);
  }
  for (std::size_t i = 0; i < renames.size(); ++i)
    if (!used[i])
      throw std::invalid_argument("rename_keys: '" + renames[i].from + "=" + renames[i].to +
                                  "' matches no key (a key equal to '" + renames[i].from + "' or starting with '" +
                                  renames[i].from + ".')");
  return out;
}

std::string describe_key_structure(const std::vector<std::string>& file_keys,
                                   const std::vector<std::string>& model_keys) {
  if (file_keys.empty() || model_keys.empty()) return "";
  const auto file_groups = group_by_head(file_keys), model_groups = group_by_head(model_keys);
  std::vector<std::string> file_heads, model_heads;
  for (auto& g : file_groups) file_heads.push_back(g.first);
  for (auto& g : model_groups) model_heads.push_back(g.first);
  const auto in = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };

  // A wrapper's prefix on one side only (DataParallel's "module.", a training script's "model.").
  const std::string fh = common_head(file_keys), mh = common_head(model_keys);
  // a prefix counts when dropping it (or adding it) makes some keys match
  const auto matches_after = [&](const std::vector<std::string>& from, const std::string& head,
                                 const std::vector<std::string>& to, bool drop) {
    for (const auto& k : from)
      for (const auto& m : to)
        if (drop ? (k.size() == head.size() + 1 + m.size() && k.compare(head.size() + 1, m.size(), m) == 0)
                 : (m == head + "." + k))
          return true;
    return false;
  };
  if (!fh.empty() && fh != mh && !in(model_heads, fh) && matches_after(file_keys, fh, model_keys, true)) {
    std::string s = "every key in the file starts with '" + fh + ".'";
    if (fh == "module") s += " (DataParallel / DistributedDataParallel)";
    return s + " and no key of the model does; strip it: strip_prefix(dict, \"" + fh + ".\") / --strip-prefix " + fh +
           ".";
  }
  if (!mh.empty() && mh != fh && !in(file_heads, mh) && matches_after(file_keys, mh, model_keys, false))
    return "every key of the model starts with '" + mh + ".' and no key in the file does; add it: rename_keys or " +
           "--rename with NEW starting with '" + mh + ".'";

  std::vector<std::string> only_file, only_model;
  for (auto& h : file_heads)
    if (!in(model_heads, h)) only_file.push_back(h);
  for (auto& h : model_heads)
    if (!in(file_heads, h)) only_model.push_back(h);
  if (only_file.empty() || only_model.empty()) return "";  // same names; children or keys missing or added

  std::string s = "the file's keys use " + describe_heads(file_heads) + "; the model's are " + describe_heads(model_heads);
  // Same number of top-level entries holding the same leaf names in order: a renaming maps them.
  bool mappable = file_groups.size() == model_groups.size();
  for (std::size_t i = 0; mappable && i < file_groups.size(); ++i)
    mappable = file_groups[i].second == model_groups[i].second;
  if (mappable) {
    std::vector<std::string> pairs;
    for (std::size_t i = 0; i < file_groups.size(); ++i)
      if (file_groups[i].first != model_groups[i].first) pairs.push_back(file_groups[i].first + "=" + model_groups[i].first);
    s += " (in order they hold the same names; rename " + list_names(pairs, 16) + ": rename_keys / --rename)";
  }
  return s;
}

}  // namespace tapegrad::layers
