#pragma once
// read_csv: a numeric CSV file (RFC 4180: quoted fields, "" escapes, CRLF, LF or CR line ends)
// into a Dataset, one sample per row: every column but the label is a float32 feature,
// the label column becomes the targets.
//
//   Dataset iris = data::read_csv("iris.csv", {.label = "species"});
//   // X (150, 4) float32; y (150) int64; iris.class_names = {"setosa", "versicolor", "virginica"}
//   Dataset house = data::read_csv("house.csv.gz", {.label = "price", .task = data::CsvTask::Regression});
//   // y (N) float32
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <tapegrad/data/dataset.h>

namespace tapegrad::data {

/// A column given by its header name or by its 0-based index (negative counts from the
/// end: -1 is the last column).
struct CsvColumn {
  /// The column at 0-based `index_` (negative counts from the end).
  CsvColumn(std::int64_t index_) : index(index_) {}                // NOLINT: implicit on purpose
  /// The column at 0-based `index_` (negative counts from the end).
  CsvColumn(int index_) : index(index_) {}                         // NOLINT
  /// The column whose header is `name_`.
  CsvColumn(std::string name_) : name(std::move(name_)) {}         // NOLINT
  /// The column whose header is `name_`.
  CsvColumn(const char* name_) : name(name_) {}                    // NOLINT
  std::string name;        ///< used when not empty
  std::int64_t index = -1;  ///< used when name is empty; -1: the last column
};

/// What the label column holds.
enum class CsvTask {
  /// Class labels. When every label is an integer (optionally signed, no decimal point),
  /// it is the class index itself (must be >= 0). Otherwise every label is a string and
  /// the distinct strings, sorted (byte order), become classes 0, 1, ... with the mapping
  /// kept in Dataset::class_names. y: int64 (N).
  Classification,
  /// Numeric targets. y: float32 (N).
  Regression,
};

/// How read_csv parses a file and which column is the label.
struct CsvOptions {
  CsvColumn label = -1;     ///< the label column (default: the last one)
  CsvTask task = CsvTask::Classification;  ///< class labels (default) or numeric targets
  char delimiter = ',';     ///< field separator (',' ';' a tab ...); not a double quote, CR or LF
  bool header = true;       ///< the first row names the columns (otherwise they are "0", "1", ...)
  /// Lines skipped at the top of the file before the header (or the first row), e.g. 1 for
  /// scikit-learn's bundled digits.csv.gz and breast_cancer.csv, whose first line is a count
  /// line ("1797,64,...") rather than column names (pandas' skiprows=N). Whole lines, as
  /// they are (no quoting); line numbers in messages still count them. >= 0.
  std::int64_t skip_rows = 0;
  /// The most bytes a gzip-compressed file may inflate to (default 1 GiB); beyond it read_csv
  /// stops with an error naming this limit instead of exhausting memory (a gzip bomb). Not
  /// applied to a plain-text file.
  std::uint64_t max_decompressed_bytes = std::uint64_t{1} << 30;
};

/// Reads `path`: plain text, or gzip-compressed (recognised by its magic bytes, whatever
/// the file's name; every member of a multi-member file; see read_maybe_gzip in gzip.h).
/// A UTF-8 byte-order mark at the start is dropped (as Python's utf-8-sig and pandas);
/// CRLF, LF and a lone CR each end a line. Empty lines are skipped. String class labels
/// are trimmed of spaces and tabs, as numbers are. Feature values are decimal numbers as
/// strtod reads them (surrounding spaces allowed, e.g. "1", "-2.5e3", " 0.25 "); NaN and
/// infinities are refused as missing data.
/// Throws std::runtime_error naming the path when the file cannot be read, when its gzip
/// stream is cut short, corrupt (CRC32 / length mismatch) or followed by other data, or
/// when it inflates to more than max_decompressed_bytes; and
/// std::invalid_argument naming the file, the 1-based line number and the column (name and
/// 0-based index) for: a row with a different number of fields than the header (or the
/// first row), an empty (missing) or non-numeric value, a non-finite value, a negative
/// integer class label, an unterminated quoted field or text after a closing quote; and
/// naming the file for: no data rows (an empty file, or a header only), an unknown label
/// column (listing the columns), a label name that several header columns carry, fewer
/// than 2 columns, a bad delimiter, skip_rows < 0, or
/// skip_rows that skips every line.
Dataset read_csv(const std::string& path, const CsvOptions& options = {});

/// read_csv on text in memory (no gzip); `source` names it in messages. A pure function of
/// its input (a fuzzing entry point); throws as read_csv.
Dataset parse_csv(std::string_view text, const CsvOptions& options = {}, const std::string& source = "<memory>");

}  // namespace tapegrad::data
