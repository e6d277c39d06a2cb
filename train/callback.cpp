#include <tapegrad/train/callback.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

#include <tapegrad/train/fit.h>

namespace tapegrad::train {

std::optional<double> EpochLogs::find(const std::string& key) const {
  for (const auto& [k, v] : values)
    if (k == key) return v;
  return std::nullopt;
}

double EpochLogs::get(const std::string& key) const {
  if (auto v = find(key)) return *v;
  throw std::invalid_argument("epoch " + std::to_string(epoch) + " logged no '" + key + "' (it logged: " + keys() +
                              "); a validation set gives val_loss and val_accuracy");
}

void EpochLogs::set(const std::string& key, double value) {
  for (auto& [k, v] : values)
    if (k == key) {
      v = value;
      return;
    }
  values.emplace_back(key, value);
}

std::string EpochLogs::keys() const {
  std::string out;
  for (const auto& [k, v] : values) { if (!out.empty()) out += ", "; out += k; }
  return out.empty() ? "nothing" : out;
}

Mode parse_mode(const std::string& text) {
  if (text == "min") return Mode::Min;
  if (text == "max") return Mode::Max;
  throw std::invalid_argument("mode: expected min or max, got '" + text + "'");
}

std::string history_to_json(const std::vector<EpochLogs>& history) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& e : history) {
    nlohmann::ordered_json o;
    o["epoch"] = e.epoch;
    for (const auto& [k, v] : e.values) {
      if (std::isfinite(v))
        o[k] = v;
      else  // JSON has no NaN or infinity
        o[k] = std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
    }
    arr.push_back(std::move(o));
  }
  return arr.dump();
}

std::vector<EpochLogs> history_from_json(const std::string& json) {
  std::vector<EpochLogs> out;
  try {
    const auto arr = nlohmann::ordered_json::parse(json);
    if (!arr.is_array()) throw std::invalid_argument("expected a JSON array");
    for (const auto& o : arr) {
      if (!o.is_object() || !o.contains("epoch") || !o["epoch"].is_number_integer())
        throw std::invalid_argument("expected objects with an integer \"epoch\"");
      // in int's range (get<int> of 4294967297 would give 1)
      if (o["epoch"].is_number_unsigned() ? o["epoch"].get<std::uint64_t>() > 1000000000u
                                           : o["epoch"].get<std::int64_t>() < 0 || o["epoch"].get<std::int64_t>() > 1000000000)
        throw std::invalid_argument("expected an integer \"epoch\" in [0, 1e9], got " + o["epoch"].dump());
      EpochLogs e;
      e.epoch = o["epoch"].get<int>();
      for (const auto& [k, v] : o.items()) {
        if (k == "epoch") continue;
        if (v.is_string()) {
          const std::string t = v.get<std::string>();
          if (t != "nan" && t != "inf" && t != "-inf")
            throw std::invalid_argument("value of '" + k + "' is not a number: '" + t + "'");
          e.values.emplace_back(k, t == "nan" ? std::nan("") : (t == "inf" ? HUGE_VAL : -HUGE_VAL));
          continue;
        }
        if (!v.is_number()) throw std::invalid_argument("value of '" + k + "' is not a number");
        e.values.emplace_back(k, v.get<double>());
      }
      out.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("history: malformed JSON: ") + e.what());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("history: ") + e.what());
  }
  return out;
}

std::vector<std::string> callback_state_names(const std::vector<CallbackPtr>& callbacks) {
  std::vector<std::string> out;
  std::map<std::string, int> seen;
  for (const auto& cb : callbacks) {
    const std::string n = cb->name();
    const int k = ++seen[n];
    out.push_back(k == 1 ? n : n + "#" + std::to_string(k));
  }
  return out;
}

optim::CheckpointExtras TrainState::checkpoint_extras() const {
  optim::CheckpointExtras x;
  if (user_extras) x = *user_extras;
  x.metadata[kHistoryKey] = history_to_json(history);
  x.metadata["train.epochs"] = std::to_string(epochs);
  if (stop_training) x.metadata[kStoppedKey] = stop_reason.empty() ? "stopped" : stop_reason;
  if (callbacks) {
    const std::vector<std::string> names = callback_state_names(*callbacks);
    std::string list;
    for (std::size_t i = 0; i < names.size(); ++i) {
      list += (i ? "," : "") + names[i];
      for (const auto& [k, v] : (*callbacks)[i]->state_dict()) x.metadata["callback." + names[i] + "." + k] = v;
    }
    x.metadata[kCallbacksKey] = list;
  }
  return x;
}

}  // namespace tapegrad::train
