#include <tapegrad/io/torch_pickle.h>

#include <cstring>
#include <stdexcept>
#include <unordered_map>

namespace tapegrad::io {

namespace {

using Kind = PickleValue::Kind;

// PickleValue::i of a Kind::Global: the only callables a pickle may name.
enum GlobalId : std::int64_t { kOrderedDict = 1, kRebuildTensorV2, kRebuildParameter, kStorageType };

constexpr std::size_t kMaxRank = 64;
constexpr std::size_t kMaxGlobalLine = 256;

const char* opcode_name(std::uint8_t op) {
  switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

std::string hex_byte(std::uint8_t b) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

class Unpickler {
 public:
  Unpickler(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}

  TorchPickle run() {
    if (n_ > kTorchMaxPickleBytes)
      fail("the pickle is " + std::to_string(n_) + " bytes, above the limit of " +
           std::to_string(kTorchMaxPickleBytes) + " (kTorchMaxPickleBytes)");
    while (pos_ < n_) {
      op_pos_ = pos_;
      const std::uint8_t op = p_[pos_++];
      if (step(op)) {
        if (stack_.size() != 1 || !marks_.empty())
          fail("STOP with " + std::to_string(stack_.size()) + " values and " + std::to_string(marks_.size()) +
               " open MARKs on the stack (expected exactly one value)");
        if (pos_ != n_) fail(std::to_string(n_ - pos_) + " bytes after STOP");
        out_.root = stack_.back();
        return std::move(out_);
      }
    }
    op_pos_ = n_;
    fail("truncated: the pickle ends without a STOP opcode");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("pickle: " + what + " (at byte " + std::to_string(op_pos_) + ")");
  }

  // ---- reading arguments ---------------------------------------------------------------
  const std::uint8_t* take(std::size_t count, const char* what) {
    if (count > n_ - pos_)
      fail(std::string("truncated ") + what + ": needs " + std::to_string(count) + " bytes, " +
           std::to_string(n_ - pos_) + " remain");
    const std::uint8_t* at = p_ + pos_;
    pos_ += count;
    return at;
  }
  std::uint64_t read_le(std::size_t bytes, const char* what) {
    const std::uint8_t* b = take(bytes, what);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < bytes; ++i) v |= std::uint64_t{b[i]} << (8 * i);
    return v;
  }
  std::string read_line() {
    std::size_t end = pos_;
    while (end < n_ && p_[end] != '\n' && end - pos_ <= kMaxGlobalLine) ++end;
    if (end >= n_ || p_[end] != '\n') fail("GLOBAL name not terminated by a newline within 256 bytes");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), end - pos_);
    pos_ = end + 1;
    return s;
  }
  std::string read_string(std::uint64_t len, const char* what) {
    if (len > n_ - pos_)
      fail(std::string("truncated ") + what + ": declares " + std::to_string(len) + " bytes, " +
           std::to_string(n_ - pos_) + " remain");
    const std::uint8_t* b = take(static_cast<std::size_t>(len), what);
    return std::string(reinterpret_cast<const char*>(b), static_cast<std::size_t>(len));
  }
  std::int64_t read_long(std::uint64_t nbytes) {
    if (nbytes > 8) fail("integer of " + std::to_string(nbytes) + " bytes: only 64-bit integers are supported");
    if (nbytes > n_ - pos_) fail("truncated LONG argument");
    if (nbytes == 0) return 0;
    std::uint64_t v = read_le(static_cast<std::size_t>(nbytes), "LONG argument");
    if (nbytes < 8 && (v >> (8 * nbytes - 1)) & 1) v |= ~std::uint64_t{0} << (8 * nbytes);  // sign-extend
    return static_cast<std::int64_t>(v);
  }

  // ---- values ------------------------------------------------------------------------
  std::size_t make(Kind k) {
    out_.values.emplace_back();
    out_.values.back().kind = k;
    return out_.values.size() - 1;
  }
  std::size_t make_int(Kind k, std::int64_t v) {
    const std::size_t id = make(k);
    out_.values[id].i = v;
    return id;
  }
  PickleValue& val(std::size_t id) { return out_.values[id]; }
  void push(std::size_t id) { stack_.push_back(id); }
  std::size_t pop(const char* op) {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back()))
      fail(std::string(op) + " on an empty stack" + (marks_.empty() ? "" : " (above the last MARK)"));
    const std::size_t id = stack_.back();
    stack_.pop_back();
    return id;
  }
  std::size_t top(const char* op) {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail(std::string(op) + " on an empty stack");
    return stack_.back();
  }
  // The values above the last MARK, which is closed.
  std::vector<std::size_t> pop_mark(const char* op) {
    if (marks_.empty()) fail(std::string(op) + " without a MARK");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<std::size_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  std::size_t make_tuple(std::vector<std::size_t> items) {
    const std::size_t id = make(Kind::Tuple);
    val(id).items = std::move(items);
    return id;
  }

  std::string dict_key(std::size_t key_id) {
    const PickleValue& k = val(key_id);
    switch (k.kind) {
      case Kind::String: return std::string(1, 's').append(k.s);
      case Kind::Int:
      case Kind::Bool: return std::string(1, 'i').append(std::to_string(k.i));  // Python: True == 1
      case Kind::None: return "n";
      default: fail(std::string("dict key of type ") + pickle_kind_name(k.kind) + " (only str, int, bool, None)");
    }
  }
  void set_item(std::size_t dict_id, std::size_t key_id, std::size_t value_id, const char* op) {
    if (val(dict_id).kind != Kind::Dict)
      fail(std::string(op) + " on a " + pickle_kind_name(val(dict_id).kind) + ", not a dict");
    auto& index = dict_index_[dict_id];
    auto [it, added] = index.try_emplace(dict_key(key_id), val(dict_id).items.size());
    if (added) {
      val(dict_id).items.push_back(key_id);
      val(dict_id).items.push_back(value_id);
    } else {
      val(dict_id).items[it->second + 1] = value_id;  // Python: a repeated key replaces the value
    }
  }
  void append(std::size_t list_id, std::size_t item, const char* op) {
    if (val(list_id).kind != Kind::List)
      fail(std::string(op) + " on a " + pickle_kind_name(val(list_id).kind) + ", not a list");
    val(list_id).items.push_back(item);
  }
  void memo_put(std::uint64_t index) {
    memo_[index] = top("memo store");
  }
  void memo_get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo index " + std::to_string(index) + " read before it was stored");
    push(it->second);
  }

  std::size_t global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    std::int64_t id = 0;
    if (module == "collections" && name == "OrderedDict") id = kOrderedDict;
    else if (module == "torch._utils" && name == "_rebuild_tensor_v2") id = kRebuildTensorV2;
    else if (module == "torch._utils" && name == "_rebuild_parameter") id = kRebuildParameter;
    else if (module == "torch" && (name == "FloatStorage" || name == "DoubleStorage" || name == "HalfStorage" ||
                                   name == "BFloat16Storage" || name == "LongStorage" || name == "IntStorage" ||
                                   name == "ShortStorage" || name == "CharStorage" || name == "ByteStorage" ||
                                   name == "BoolStorage"))
      id = kStorageType;
    if (id == 0)
      fail("refusing global '" + full +
           "': a state dict needs only collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
           "torch._utils._rebuild_parameter and torch.*Storage");
    const std::size_t v = make_int(Kind::Global, id);
    val(v).s = name;
    return v;
  }

  std::int64_t int_arg(std::size_t id, const char* what) {
    if (val(id).kind != Kind::Int) fail(std::string(what) + " is a " + pickle_kind_name(val(id).kind) + ", not an int");
    return val(id).i;
  }
  std::vector<std::int64_t> dims_arg(std::size_t id, const char* what) {
    if (val(id).kind != Kind::Tuple) fail(std::string(what) + " is a " + pickle_kind_name(val(id).kind) + ", not a tuple");
    if (val(id).items.size() > kMaxRank)
      fail(std::string(what) + " has " + std::to_string(val(id).items.size()) + " dimensions (at most 64)");
    std::vector<std::int64_t> dims;
    for (std::size_t item : val(id).items) {
      const std::int64_t d = int_arg(item, what);
      if (d < 0) fail(std::string(what) + " holds the negative value " + std::to_string(d));
      dims.push_back(d);
    }
    return dims;
  }

  std::size_t reduce(std::size_t callable, std::size_t args) {
    if (val(callable).kind != Kind::Global)
      fail(std::string("REDUCE calls a ") + pickle_kind_name(val(callable).kind) + ", not an allowed global");
    if (val(args).kind != Kind::Tuple)
      fail(std::string("REDUCE arguments are a ") + pickle_kind_name(val(args).kind) + ", not a tuple");
    const std::vector<std::size_t> a = val(args).items;
    switch (val(callable).i) {
      case kOrderedDict: {
        if (!a.empty()) fail("collections.OrderedDict called with " + std::to_string(a.size()) + " arguments (expected none)");
        const std::size_t d = make(Kind::Dict);
        val(d).ordered = true;
        return d;
      }
      case kRebuildTensorV2: {
        if (a.size() != 6 && a.size() != 7)
          fail("_rebuild_tensor_v2 called with " + std::to_string(a.size()) + " arguments (expected 6 or 7)");
        if (val(a[0]).kind != Kind::Storage)
          fail(std::string("_rebuild_tensor_v2's storage is a ") + pickle_kind_name(val(a[0]).kind) +
               ", not a persistent storage");
        PickleTensor t;
        t.storage = static_cast<std::size_t>(val(a[0]).i);
        t.offset = int_arg(a[1], "_rebuild_tensor_v2's storage offset");
        if (t.offset < 0) fail("_rebuild_tensor_v2's storage offset is negative (" + std::to_string(t.offset) + ")");
        t.size = dims_arg(a[2], "_rebuild_tensor_v2's size");
        t.stride = dims_arg(a[3], "_rebuild_tensor_v2's stride");
        if (t.size.size() != t.stride.size())
          fail("_rebuild_tensor_v2's size has " + std::to_string(t.size.size()) + " dimensions and its stride " +
               std::to_string(t.stride.size()));
        if (val(a[4]).kind != Kind::Bool) fail("_rebuild_tensor_v2's requires_grad is not a bool");
        t.requires_grad = val(a[4]).i != 0;
        if (val(a[5]).kind != Kind::Dict) fail("_rebuild_tensor_v2's backward_hooks is not a dict");
        if (a.size() == 7 && val(a[6]).kind != Kind::Dict && val(a[6]).kind != Kind::None)
          fail("_rebuild_tensor_v2's metadata is neither a dict nor None");
        out_.tensors.push_back(std::move(t));
        return make_int(Kind::Tensor, static_cast<std::int64_t>(out_.tensors.size() - 1));
      }
      case kRebuildParameter: {
        if (a.size() != 3)
          fail("_rebuild_parameter called with " + std::to_string(a.size()) + " arguments (expected 3)");
        if (val(a[0]).kind != Kind::Tensor) fail("_rebuild_parameter's data is not a tensor");
        if (val(a[1]).kind != Kind::Bool) fail("_rebuild_parameter's requires_grad is not a bool");
        return a[0];
      }
      default:
        fail("REDUCE calls torch." + val(callable).s + ", which is not callable here");
    }
  }

  std::size_t persistent_load(std::size_t pid) {
    const PickleValue& t = val(pid);
    if (t.kind != Kind::Tuple || t.items.size() != 5)
      fail("persistent id is not a 5-tuple ('storage', type, key, location, numel)");
    const PickleValue& tag = val(t.items[0]);
    if (tag.kind != Kind::String || tag.s != "storage") fail("persistent id does not start with 'storage'");
    const PickleValue& type = val(t.items[1]);
    if (type.kind != Kind::Global || type.i != kStorageType) fail("persistent id's type is not a torch.*Storage");
    const PickleValue& key = val(t.items[2]);
    const PickleValue& loc = val(t.items[3]);
    if (key.kind != Kind::String || loc.kind != Kind::String) fail("persistent id's key or location is not a str");
    const std::int64_t numel = int_arg(t.items[4], "persistent id's numel");
    if (numel < 0) fail("persistent id's numel is negative (" + std::to_string(numel) + ")");
    auto [it, added] = storage_index_.try_emplace(key.s, out_.storages.size());
    if (added) {
      out_.storages.push_back({type.s, key.s, loc.s, numel});
    } else {
      const PickleStorage& s = out_.storages[it->second];
      if (s.type != type.s || s.numel != numel)
        fail("storage '" + key.s + "' appears as " + s.type + " of " + std::to_string(s.numel) + " elements and as " +
             type.s + " of " + std::to_string(numel));
    }
    return make_int(Kind::Storage, static_cast<std::int64_t>(it->second));
  }

  // Runs one opcode; true at STOP.
  bool step(std::uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const std::uint64_t v = read_le(1, "PROTO argument");
        if (v < 2 || v > 5) fail("pickle protocol " + std::to_string(v) + " (expected 2 to 5)");
        return false;
      }
      case 0x95: {  // FRAME: a length prefix of the bytes that follow; nothing to do
        const std::uint64_t len = read_le(8, "FRAME length");
        if (len > n_ - pos_) fail("FRAME of " + std::to_string(len) + " bytes, " + std::to_string(n_ - pos_) + " remain");
        return false;
      }
      case '.': return true;
      case '(': marks_.push_back(stack_.size()); return false;
      case '0': pop("POP"); return false;
      case '1': pop_mark("POP_MARK"); return false;
      case '2': push(top("DUP")); return false;
      case 'N': push(make(Kind::None)); return false;
      case 0x88: push(make_int(Kind::Bool, 1)); return false;
      case 0x89: push(make_int(Kind::Bool, 0)); return false;
      case 'K': push(make_int(Kind::Int, static_cast<std::int64_t>(read_le(1, "BININT1 argument")))); return false;
      case 'M': push(make_int(Kind::Int, static_cast<std::int64_t>(read_le(2, "BININT2 argument")))); return false;
      case 'J':
        push(make_int(Kind::Int, static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(4, "BININT argument")))));
        return false;
      case 0x8a: push(make_int(Kind::Int, read_long(read_le(1, "LONG1 length")))); return false;
      case 0x8b: push(make_int(Kind::Int, read_long(read_le(4, "LONG4 length")))); return false;
      case 'G': {
        const std::uint8_t* b = take(8, "BINFLOAT argument");
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | b[i];  // big-endian
        const std::size_t id = make(Kind::Float);
        std::memcpy(&val(id).f, &bits, 8);
        push(id);
        return false;
      }
      case 'X':
      case 0x8c:
      case 0x8d: {
        const std::uint64_t len = op == 'X' ? read_le(4, "BINUNICODE length")
                                  : op == 0x8c ? read_le(1, "SHORT_BINUNICODE length")
                                               : read_le(8, "BINUNICODE8 length");
        std::string s = read_string(len, "string");
        const std::size_t id = make(Kind::String);
        val(id).s = std::move(s);
        push(id);
        return false;
      }
      case ')': push(make(Kind::Tuple)); return false;
      case 't': push(make_tuple(pop_mark("TUPLE"))); return false;
      case 0x85:
      case 0x86:
      case 0x87: {
        const std::size_t k = op - 0x84u;
        std::vector<std::size_t> items(k);
        for (std::size_t i = k; i-- > 0;) items[i] = pop(opcode_name(op));
        push(make_tuple(std::move(items)));
        return false;
      }
      case ']': push(make(Kind::List)); return false;
      case 'l': {
        const std::size_t id = make(Kind::List);
        val(id).items = pop_mark("LIST");
        push(id);
        return false;
      }
      case 'a': {
        const std::size_t item = pop("APPEND");
        append(top("APPEND"), item, "APPEND");
        return false;
      }
      case 'e': {
        const std::vector<std::size_t> items = pop_mark("APPENDS");
        const std::size_t list = top("APPENDS");
        for (std::size_t item : items) append(list, item, "APPENDS");
        return false;
      }
      case '}': push(make(Kind::Dict)); return false;
      case 'd': {
        const std::vector<std::size_t> items = pop_mark("DICT");
        if (items.size() % 2) fail("DICT with an odd number of items");
        const std::size_t id = make(Kind::Dict);
        for (std::size_t i = 0; i < items.size(); i += 2) set_item(id, items[i], items[i + 1], "DICT");
        push(id);
        return false;
      }
      case 's': {
        const std::size_t v = pop("SETITEM");
        const std::size_t k = pop("SETITEM");
        set_item(top("SETITEM"), k, v, "SETITEM");
        return false;
      }
      case 'u': {
        const std::vector<std::size_t> items = pop_mark("SETITEMS");
        if (items.size() % 2) fail("SETITEMS with an odd number of items");
        const std::size_t d = top("SETITEMS");
        for (std::size_t i = 0; i < items.size(); i += 2) set_item(d, items[i], items[i + 1], "SETITEMS");
        return false;
      }
      case 'q': memo_put(read_le(1, "BINPUT index")); return false;
      case 'r': memo_put(read_le(4, "LONG_BINPUT index")); return false;
      case 0x94: memo_put(memo_.size()); return false;
      case 'h': memo_get(read_le(1, "BINGET index")); return false;
      case 'j': memo_get(read_le(4, "LONG_BINGET index")); return false;
      case 'c': {
        const std::string module = read_line();
        const std::string name = read_line();
        push(global(module, name));
        return false;
      }
      case 0x93: {
        const std::size_t name = pop("STACK_GLOBAL");
        const std::size_t module = pop("STACK_GLOBAL");
        if (val(name).kind != Kind::String || val(module).kind != Kind::String)
          fail("STACK_GLOBAL's module and name are not strings");
        push(global(val(module).s, val(name).s));
        return false;
      }
      case 'R': {
        const std::size_t args = pop("REDUCE");
        const std::size_t callable = pop("REDUCE");
        push(reduce(callable, args));
        return false;
      }
      case 'Q': push(persistent_load(pop("BINPERSID"))); return false;
      case 'b': {
        const std::size_t state = pop("BUILD");
        const std::size_t obj = top("BUILD");
        // An OrderedDict's instance attributes (a state dict's _metadata): kept out of the items.
        if (val(obj).kind != Kind::Dict || val(state).kind != Kind::Dict)
          fail(std::string("BUILD of a ") + pickle_kind_name(val(obj).kind) + " with a " +
               pickle_kind_name(val(state).kind) + " (only a dict's attributes from a dict)");
        return false;
      }
      default: {
        const char* name = opcode_name(op);
        fail("unsupported pickle opcode " + hex_byte(op) + (name ? std::string(" (") + name + ")" : std::string()) +
             ": a state dict needs only the opcodes listed in io/torch_pickle.h");
      }
    }
  }

  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0, op_pos_ = 0;
  std::vector<std::size_t> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, std::size_t> memo_;
  std::unordered_map<std::size_t, std::unordered_map<std::string, std::size_t>> dict_index_;
  std::unordered_map<std::string, std::size_t> storage_index_;
  TorchPickle out_;
};

}  // namespace

const char* pickle_kind_name(PickleValue::Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Tuple: return "tuple";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Global: return "global";
    case Kind::Storage: return "storage";
    case Kind::Tensor: return "tensor";
  }
  return "?";
}

TorchPickle unpickle_torch(const std::uint8_t* data, std::size_t size) { return Unpickler(data, size).run(); }

}  // namespace tapegrad::io
