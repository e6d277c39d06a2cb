#pragma once
// Enum <-> name tables: one list of (value, name) rows, read both ways.
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tapegrad {

/// One row of a name table: an enum value and its name.
template <class E>
struct NamedValue {
  /// The value.
  E value;
  /// Its name, as printed and parsed.
  const char* name;
};

/// The name of `value` in `table`, or `missing` when no row holds it.
template <class E, std::size_t N>
constexpr const char* name_of(const NamedValue<E> (&table)[N], E value, const char* missing = "?") {
  for (const NamedValue<E>& row : table)
    if (row.value == value) return row.name;
  return missing;
}

/// The value whose name is `name` in `table` (exact match), or std::nullopt.
template <class E, std::size_t N>
constexpr std::optional<E> value_named(const NamedValue<E> (&table)[N], std::string_view name) {
  for (const NamedValue<E>& row : table)
    if (name == row.name) return row.value;
  return std::nullopt;
}

/// value_named, or std::invalid_argument "unknown <what> '<name>': expected a, b or c" (the
/// table's names in order).
template <class E, std::size_t N>
E parse_named(const NamedValue<E> (&table)[N], std::string_view name, const char* what) {
  if (const std::optional<E> v = value_named(table, name)) return *v;
  std::string expected;
  for (std::size_t i = 0; i < N; ++i)
    expected += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(table[i].name);
  throw std::invalid_argument("unknown " + std::string(what) + " '" + std::string(name) + "': expected " + expected);
}

}  // namespace tapegrad
