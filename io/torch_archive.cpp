#include <tapegrad/io/torch_archive.h>

#include <zip.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

namespace tapegrad::io {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("torch.save file: " + what); }

std::string zip_message(zip_error_t* e) {
  if (zip_error_code_zip(e) == ZIP_ER_EXISTS) return "two entries share a name";  // libzip's consistency check
  return zip_error_strerror(e);
}

struct ArchiveCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct FileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};
using ArchivePtr = std::unique_ptr<zip_t, ArchiveCloser>;

bool safe_storage_key(const std::string& key) {
  return !key.empty() && key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  });
}

class Archive {
 public:
  Archive(ArchivePtr zip, std::uint64_t archive_size, const TorchReadOptions& options,
          std::vector<std::string>* converted)
      : zip_(std::move(zip)), options_(options), converted_(converted) {
    budget_ = options.max_bytes ? options.max_bytes : torch_default_max_bytes(archive_size);
    index_entries();
  }

  layers::StateDict state_dict() {
    const std::vector<std::uint8_t> pkl = read_record(prefix_ + "data.pkl", std::nullopt, kTorchMaxPickleBytes);
    bool big_endian = false;
    if (entries_.count(prefix_ + "byteorder")) {
      const std::vector<std::uint8_t> b = read_record(prefix_ + "byteorder", std::nullopt, 16);
      const std::string order(b.begin(), b.end());
      if (order == "big") big_endian = true;
      else if (order != "little") fail("byteorder record says '" + order.substr(0, 16) + "' (expected little or big)");
    }
    TorchPickle pickle;
    try {
      pickle = unpickle_torch(pkl.data(), pkl.size());
    } catch (const std::runtime_error& e) {
      fail(prefix_ + "data.pkl: " + e.what());
    }
    StorageReader reader = [&](const PickleStorage& s, std::size_t nbytes) {
      if (!safe_storage_key(s.key)) fail("storage key '" + s.key.substr(0, 64) + "' is not a plain record name");
      const std::string name = prefix_ + "data/" + s.key;
      std::shared_ptr<Storage> storage;
      read_record(name, nbytes, nbytes, [&](std::uint64_t size) {
        storage = std::make_shared<Storage>(static_cast<std::size_t>(size));
        return storage->data();
      });
      if (big_endian) {
        const std::size_t e = torch_element(s.type).size;
        auto* p = static_cast<unsigned char*>(storage->data());
        for (std::size_t i = 0; e > 1 && i + e <= nbytes; i += e) std::reverse(p + i, p + i + e);
      }
      return storage;
    };
    return torch_state_dict(pickle, reader, options_, budget_, converted_);
  }

 private:
  void index_entries() {
    const zip_int64_t n = zip_get_num_entries(zip_.get(), 0);
    if (n <= 0) fail("the archive is empty");
    for (zip_int64_t i = 0; i < n; ++i) {
      zip_stat_t st;
      zip_stat_init(&st);
      if (zip_stat_index(zip_.get(), static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW, &st) != 0 ||
          !(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE))
        fail("cannot read entry " + std::to_string(i) + " of the archive: " + zip_strerror(zip_.get()));
      const std::string name = st.name;
      check_name(name);
      if (!entries_.emplace(name, st).second) fail("the archive holds two entries named '" + name + "'");
    }
    // every entry under one folder, the archive's name ("archive/" or the file's stem)
    const std::string first = entries_.begin()->first;
    prefix_ = first.substr(0, first.find('/') + 1);
    if (prefix_.empty() || prefix_ == "/") fail("entry '" + first + "' is not inside the archive's folder");
    for (auto& [name, st] : entries_)
      if (name.compare(0, prefix_.size(), prefix_) != 0)
        fail("entries '" + first + "' and '" + name + "' lie in different top-level folders");
    if (!entries_.count(prefix_ + "data.pkl"))
      fail("no " + prefix_ + "data.pkl in the archive: not a torch.save file (TorchScript archives and the "
                             "legacy pre-1.6 format are not read)");
  }

  static void check_name(const std::string& name) {
    const auto bad = [&](const std::string& why) { fail("entry name '" + name.substr(0, 200) + "' " + why); };
    if (name.empty()) bad("is empty");
    if (name.size() > 4096) bad("is longer than 4096 bytes");
    if (name.front() == '/') bad("is an absolute path");
    if (name.find('\\') != std::string::npos) bad("holds a backslash");
    if (name.find(':') != std::string::npos) bad("holds a ':' (a drive letter)");
    std::size_t start = 0;
    while (start <= name.size()) {
      const std::size_t end = std::min(name.find('/', start), name.size());
      const std::string part = name.substr(start, end - start);
      if (part == "..") bad("climbs out of the archive ('..')");
      start = end + 1;
    }
  }

  // The record's bytes; `expected`: the size it must have; `limit`: the most accepted.
  std::vector<std::uint8_t> read_record(const std::string& name, std::optional<std::uint64_t> expected,
                                        std::uint64_t limit) {
    std::vector<std::uint8_t> bytes;
    read_record(name, expected, limit, [&](std::uint64_t size) {
      bytes.resize(static_cast<std::size_t>(size));
      return static_cast<void*>(bytes.data());
    });
    return bytes;
  }

  // Reads the record into the memory `allocate(size)` returns, once every size check passed.
  template <class Allocate>
  void read_record(const std::string& name, std::optional<std::uint64_t> expected, std::uint64_t limit,
                   Allocate allocate) {
    const auto it = entries_.find(name);
    if (it == entries_.end()) fail("record '" + name + "' is missing from the archive");
    const zip_stat_t& st = it->second;
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
      fail("record '" + name + "' is encrypted");
    if ((st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
      fail("record '" + name + "' uses compression method " + std::to_string(st.comp_method) +
           " (torch.save stores records uncompressed; deflate is accepted too)");
    const std::uint64_t size = st.size;
    if (expected && size != *expected)
      fail("record '" + name + "' holds " + std::to_string(size) + " bytes; its storage declares " +
           std::to_string(*expected));
    if (size > limit)
      fail("record '" + name + "' declares " + std::to_string(size) + " bytes, above the limit of " +
           std::to_string(limit));
    if (size > budget_)
      fail("record '" + name + "' declares " + std::to_string(size) +
           " bytes, beyond the reader's allocation limit (" + std::to_string(budget_) +
           " bytes left; TorchReadOptions::max_bytes)");
    // a stored record cannot be larger than what the archive holds for it
    if ((st.valid & ZIP_STAT_COMP_SIZE) && st.comp_method == ZIP_CM_STORE && st.comp_size != size)
      fail("stored record '" + name + "' declares " + std::to_string(size) + " bytes and occupies " +
           std::to_string(st.comp_size));
    budget_ -= size;
    std::unique_ptr<zip_file_t, FileCloser> f(zip_fopen_index(zip_.get(), st.index, 0));
    if (!f) fail("cannot open record '" + name + "': " + zip_strerror(zip_.get()));
    auto* bytes = static_cast<unsigned char*>(allocate(size));
    std::uint64_t got = 0;
    while (got < size) {
      const zip_int64_t r = zip_fread(f.get(), bytes + got, size - got);
      if (r < 0) fail("record '" + name + "' is damaged: " + zip_file_strerror(f.get()));
      if (r == 0)
        fail("record '" + name + "' is truncated: " + std::to_string(got) + " of " + std::to_string(size) +
             " declared bytes");
      got += static_cast<std::uint64_t>(r);
    }
    unsigned char extra;
    const zip_int64_t more = zip_fread(f.get(), &extra, 1);  // also ends the stream: libzip checks the CRC
    if (more > 0) fail("record '" + name + "' inflates beyond its declared " + std::to_string(size) + " bytes");
    if (more < 0) fail("record '" + name + "' is damaged: " + zip_file_strerror(f.get()));
  }

  ArchivePtr zip_;
  TorchReadOptions options_;
  std::vector<std::string>* converted_;
  std::uint64_t budget_ = 0;
  std::map<std::string, zip_stat_t> entries_;
  std::string prefix_;
};

}  // namespace

bool is_legacy_torch_save(const std::uint8_t* data, std::size_t size) {
  static const std::uint8_t magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  return size >= sizeof magic && std::memcmp(data, magic, sizeof magic) == 0;
}

const char* const kLegacyTorchSaveMessage =
    "a legacy torch.save file (PyTorch < 1.6 format), which is not read; re-save it with "
    "torch.save(obj, path, _use_new_zipfile_serialization=True)";

layers::StateDict parse_torch_archive(const std::uint8_t* data, std::size_t size, const TorchReadOptions& options,
                                      std::vector<std::string>* converted) {
  if (is_legacy_torch_save(data, size)) fail(kLegacyTorchSaveMessage);
  if (size < 4 || std::memcmp(data, "PK\x03\x04", 4) != 0)
    fail("not a zip archive (torch.save files start with 'PK\\x03\\x04')");
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(data, size, 0, &err);
  if (!src) {
    const std::string m = zip_message(&err);
    zip_error_fini(&err);
    fail("cannot read the archive: " + m);
  }
  zip_t* z = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
  if (!z) {
    zip_source_free(src);
    const std::string m = zip_message(&err);
    zip_error_fini(&err);
    fail("not a readable zip archive: " + m);
  }
  zip_error_fini(&err);
  return Archive(ArchivePtr(z), size, options, converted).state_dict();
}

layers::StateDict read_torch_file(const std::string& path, const TorchReadOptions& options,
                                  std::vector<std::string>* converted) {
  try {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw std::runtime_error("cannot read: " + ec.message());
    if (!std::filesystem::is_regular_file(path)) throw std::runtime_error("not a regular file");
    {
      std::uint8_t head[16] = {};
      std::ifstream in(path, std::ios::binary);
      in.read(reinterpret_cast<char*>(head), sizeof head);
      if (is_legacy_torch_save(head, static_cast<std::size_t>(in.gcount()))) fail(kLegacyTorchSaveMessage);
    }
    int code = 0;
    zip_t* z = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (!z) {
      zip_error_t err;
      zip_error_init_with_code(&err, code);
      const std::string m = zip_message(&err);
      zip_error_fini(&err);
      throw std::runtime_error("torch.save file: not a readable zip archive: " + m);
    }
    return Archive(ArchivePtr(z), size, options, converted).state_dict();
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("'" + path + "': " + e.what());
  }
}

}  // namespace tapegrad::io
