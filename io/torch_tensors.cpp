#include <tapegrad/io/torch_tensors.h>

#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>

namespace tapegrad::io {

namespace {

using Kind = PickleValue::Kind;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("torch.save file: " + what); }

std::uint64_t mul_checked(std::uint64_t a, std::uint64_t b, const std::string& what) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) fail(what + " overflows 64 bits");
  return a * b;
}

void charge(std::uint64_t& budget, std::uint64_t bytes, const std::string& what) {
  if (bytes > budget)
    fail(what + " needs " + std::to_string(bytes) + " more bytes, beyond the reader's allocation limit (" +
         std::to_string(budget) + " bytes left; TorchReadOptions::max_bytes)");
  budget -= bytes;
}

// A key as messages quote it: at most 64 bytes.
std::string quoted(std::string_view key) { return key.size() <= 64 ? std::string(key) : std::string(key.substr(0, 64)) + "..."; }

std::string top_level_keys(const TorchPickle& p, const PickleValue& dict) {
  std::string out;
  for (std::size_t i = 0; i < dict.items.size() && i < 16; i += 2) {
    const PickleValue& k = p.value(dict.items[i]);
    out += (i ? ", " : "") + (k.kind == Kind::String ? quoted(k.s) : std::string("<") + pickle_kind_name(k.kind) + ">");
  }
  if (dict.items.size() > 16) out += ", ...";
  return out;
}

// A dict whose values are all tensors (the shape of a state dict).
bool is_tensor_dict(const TorchPickle& p, const PickleValue& v) {
  if (v.kind != Kind::Dict || v.items.empty()) return false;
  for (std::size_t i = 1; i < v.items.size(); i += 2)
    if (p.value(v.items[i]).kind != Kind::Tensor) return false;
  return true;
}

bool contiguous(const PickleTensor& t) {
  std::int64_t expect = 1;
  for (std::size_t d = t.size.size(); d-- > 0;) {
    if (t.size[d] != 1 && t.stride[d] != expect) return false;
    expect *= t.size[d];
  }
  return true;
}

}  // namespace

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  std::uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // infinity, NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {        // subnormal: normalise
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bfloat16_to_float(std::uint16_t b) {
  const std::uint32_t bits = std::uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint64_t torch_default_max_bytes(std::uint64_t file_bytes) {
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max();
  return file_bytes > (limit - (std::uint64_t{1} << 20)) / 4 ? limit : 4 * file_bytes + (std::uint64_t{1} << 20);
}

TorchElement torch_element(const std::string& type) {
  static const std::map<std::string, TorchElement> table = {
      {"FloatStorage", {"float32", 4}},  {"DoubleStorage", {"float64", 8}}, {"HalfStorage", {"float16", 2}},
      {"BFloat16Storage", {"bfloat16", 2}}, {"LongStorage", {"int64", 8}}, {"IntStorage", {"int32", 4}},
      {"ShortStorage", {"int16", 2}},    {"CharStorage", {"int8", 1}},     {"ByteStorage", {"uint8", 1}},
      {"BoolStorage", {"bool", 1}}};
  const auto it = table.find(type);
  if (it == table.end()) fail("unknown storage type torch." + type);
  return it->second;
}

layers::StateDict torch_state_dict(const TorchPickle& p, const StorageReader& read, const TorchReadOptions& options,
                                   std::uint64_t& budget, std::vector<std::string>* converted) {
  const PickleValue* dict = &p.value(p.root);
  if (dict->kind != Kind::Dict)
    fail(std::string("the pickled object is a ") + pickle_kind_name(dict->kind) + ", not a dict of tensors");
  if (!options.entry.empty()) {
    const PickleValue* found = nullptr;
    for (std::size_t i = 0; i < dict->items.size(); i += 2) {
      const PickleValue& k = p.value(dict->items[i]);
      if (k.kind == Kind::String && k.s == options.entry) found = &p.value(dict->items[i + 1]);
    }
    if (!found)
      fail("the file's dict has no key '" + quoted(options.entry) + "' (its keys: " + top_level_keys(p, *dict) + ")");
    if (found->kind != Kind::Dict)
      fail("'" + options.entry + "' holds a " + pickle_kind_name(found->kind) + ", not a dict of tensors");
    dict = found;
  }

  // The error for a dict that is not a state dict suggests the entries that are.
  auto not_a_state_dict = [&](std::string_view key, const PickleValue& v) {
    const std::string kind = pickle_kind_name(v.kind);
    const bool vowel = kind[0] == 'i' || kind[0] == 'o';
    std::string msg = "key '" + quoted(key) + "' holds " + (vowel ? "an " : "a ") + kind + ", not a tensor: the " +
                      (options.entry.empty() ? std::string("file") : "'" + options.entry + "' entry") +
                      " is not a state dict (its keys: " + top_level_keys(p, *dict) + ")";
    // each distinct dict walked once (many keys may hold one GET'd dict), at most 16 named
    std::string candidates;
    std::vector<char> walked(p.values.size(), 0);  // 1: a tensor dict, 2: not
    std::size_t named = 0;
    for (std::size_t i = 0; i < dict->items.size() && named < 16; i += 2) {
      const PickleValue& k = p.value(dict->items[i]);
      char& w = walked[dict->items[i + 1]];
      if (w == 0) w = is_tensor_dict(p, p.value(dict->items[i + 1])) ? 1 : 2;
      if (k.kind == Kind::String && w == 1) {
        { if (!candidates.empty()) candidates += ", "; candidates += quoted(k.s); }
        ++named;
      }
    }
    if (!candidates.empty())
      msg += "; the state dicts inside it are under " + candidates + ": choose one with TorchReadOptions::entry (--entry)";
    fail(msg);
  };

  std::vector<std::shared_ptr<Storage>> storages(p.storages.size());
  layers::StateDict out;
  for (std::size_t i = 0; i < dict->items.size(); i += 2) {
    const PickleValue& k = p.value(dict->items[i]);
    const PickleValue& v = p.value(dict->items[i + 1]);
    if (k.kind != Kind::String)
      fail(std::string("a key of the state dict is a ") + pickle_kind_name(k.kind) + ", not a str");
    if (v.kind != Kind::Tensor) not_a_state_dict(k.s, v);
    const PickleTensor& t = p.tensors[static_cast<std::size_t>(v.i)];
    const PickleStorage& s = p.storages[t.storage];
    const TorchElement el = torch_element(s.type);
    const std::string name = "tensor '" + quoted(k.s) + "'";
    // the entry's own memory (key, shape, TensorImpl) is charged: many keys may name one GET'd tensor
    auto add = [&](const Tensor& x) {
      charge(budget, 2 * k.s.size() + t.size.size() * sizeof(std::int64_t) + sizeof(TensorImpl) + 128,
             name + "'s state dict entry");
      out.insert(std::string(k.s), x);
    };

    Dtype dtype;
    const std::string src_dtype = el.name;
    if (src_dtype == "float32") dtype = Dtype::Float32;
    else if (src_dtype == "float64") dtype = Dtype::Float64;
    else if (src_dtype == "int64") dtype = Dtype::Int64;
    else if ((src_dtype == "float16" || src_dtype == "bfloat16") && options.half_to_float32) dtype = Dtype::Float32;
    else if (src_dtype == "float16" || src_dtype == "bfloat16")
      fail(name + " is " + src_dtype + ": tapegrad computes in float32 and float64; convert it with "
                  "TorchReadOptions::half_to_float32 (--half-to-float32)");
    else
      fail(name + " is " + src_dtype + " (torch." + s.type + "): tapegrad loads float32, float64 and int64 tensors "
                  "(float16 and bfloat16 with half_to_float32)");

    // numel, and the last element the view touches, both overflow-checked.
    std::uint64_t numel = 1, last = static_cast<std::uint64_t>(t.offset);
    for (std::size_t d = 0; d < t.size.size(); ++d) {
      numel = mul_checked(numel, static_cast<std::uint64_t>(t.size[d]), name + "'s element count");
      if (t.size[d] > 0) {
        const std::uint64_t reach =
            mul_checked(static_cast<std::uint64_t>(t.size[d] - 1), static_cast<std::uint64_t>(t.stride[d]),
                        name + "'s extent");
        if (reach > std::numeric_limits<std::uint64_t>::max() - last) fail(name + "'s extent overflows 64 bits");
        last += reach;
      }
    }
    if (numel > (std::uint64_t{1} << 60)) fail(name + " has " + std::to_string(numel) + " elements");
    const Shape shape(t.size.begin(), t.size.end());
    if (numel == 0) {
      add(Tensor::empty(shape, dtype));
      continue;
    }
    if (last >= static_cast<std::uint64_t>(s.numel))
      fail(name + " reaches element " + std::to_string(last) + " of storage '" + s.key + "', which holds " +
           std::to_string(s.numel) + " (offset " + std::to_string(t.offset) + ", size " + shape_str(shape) + ")");

    if (!storages[t.storage]) {
      const std::uint64_t nbytes = mul_checked(static_cast<std::uint64_t>(s.numel), el.size, "storage size");
      storages[t.storage] = read(s, static_cast<std::size_t>(nbytes));
      if (!storages[t.storage] || storages[t.storage]->nbytes() < nbytes)
        fail("storage '" + s.key + "' was not read in full");
    }
    const std::shared_ptr<Storage>& storage = storages[t.storage];
    const bool native = src_dtype == dtype_name(dtype);
    if (!native && converted) converted->push_back(std::string(k.s) + ": " + src_dtype + " -> " + dtype_name(dtype) + " (in the file)");
    if (native && contiguous(t)) {  // a view of the shared storage, as in PyTorch
      auto impl = std::make_shared<TensorImpl>();
      impl->storage = storage;
      impl->offset = static_cast<std::size_t>(t.offset) * el.size;
      impl->shape = shape;
      impl->dtype = dtype;
      add(Tensor(std::move(impl)));
      continue;
    }
    // A strided view or a converted dtype: gather into a new tensor.
    charge(budget, numel * dtype_size(dtype), name + " (a strided view or a converted dtype)");
    Tensor dst = Tensor::empty(shape, dtype);
    auto* to = static_cast<unsigned char*>(dst.raw_data());
    const auto* from = static_cast<const unsigned char*>(storage->data());
    const std::size_t out_size = dtype_size(dtype);
    std::vector<std::int64_t> index(t.size.size(), 0);
    std::uint64_t src = static_cast<std::uint64_t>(t.offset);
    for (std::uint64_t n = 0; n < numel; ++n) {
      const unsigned char* e = from + src * el.size;
      if (native) {
        std::memcpy(to + n * out_size, e, out_size);
      } else {
        std::uint16_t bits;
        std::memcpy(&bits, e, 2);
        const float f = src_dtype == "float16" ? half_to_float(bits) : bfloat16_to_float(bits);
        std::memcpy(to + n * out_size, &f, 4);
      }
      for (std::size_t d = index.size(); d-- > 0;) {  // next multi-index, row-major
        src += static_cast<std::uint64_t>(t.stride[d]);
        if (++index[d] < t.size[d]) break;
        src -= static_cast<std::uint64_t>(t.stride[d]) * static_cast<std::uint64_t>(t.size[d]);
        index[d] = 0;
      }
    }
    add(dst);
  }
  return out;
}

}  // namespace tapegrad::io
