#include <tapegrad/io/torch_pickle.h>
#include <tapegrad/io/torch_pickle_arena.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace tapegrad::io {

namespace {

using Kind = PickleValue::Kind;

// PickleValue::i of a Kind::Global: the only callables a pickle may name.
enum GlobalId : std::int64_t { kOrderedDict = 1, kRebuildTensorV2, kRebuildParameter, kStorageType };

constexpr std::size_t kMaxRank = 64;
constexpr std::size_t kMaxGlobalLine = 256;
constexpr std::size_t kMaxStorageName = 64;  // a storage's key and location ("0", "cuda:0")

std::string hex_byte(std::uint8_t b) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

class Unpickler {
 public:
  // reads the arena's copy of the bytes, which the strings view
  Unpickler(const std::uint8_t* data, std::size_t size)
      : arena_(data, size), p_(reinterpret_cast<const std::uint8_t*>(arena_.text().data())), n_(size) {}

  TorchPickle run() {
    if (n_ > kTorchMaxPickleBytes)
      fail("the pickle is " + std::to_string(n_) + " bytes, above the limit of " +
           std::to_string(kTorchMaxPickleBytes) + " (kTorchMaxPickleBytes)");
    while (pos_ < n_) {
      op_pos_ = pos_;
      const std::uint8_t op = p_[pos_++];
      bool stop = false;
      try {
        stop = step(op);
      } catch (const PickleArenaError& e) {
        fail(e.what());
      }
      if (stop) {
        if (stack_.size() != 1 || !marks_.empty())
          fail("STOP with " + std::to_string(stack_.size()) + " values and " + std::to_string(marks_.size()) +
               " open MARKs on the stack (expected exactly one value)");
        if (pos_ != n_) fail(std::to_string(n_ - pos_) + " bytes after STOP");
        return arena_.finish(stack_.back());
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
  std::int64_t read_long(std::uint64_t nbytes) {
    if (nbytes > 8) fail("integer of " + std::to_string(nbytes) + " bytes: only 64-bit integers are supported");
    if (nbytes > n_ - pos_) fail("truncated LONG argument");
    if (nbytes == 0) return 0;
    std::uint64_t v = read_le(static_cast<std::size_t>(nbytes), "LONG argument");
    if (nbytes < 8 && (v >> (8 * nbytes - 1)) & 1) v |= ~std::uint64_t{0} << (8 * nbytes);  // sign-extend
    return static_cast<std::int64_t>(v);
  }

  // ---- values ------------------------------------------------------------------------
  PickleValue& val(std::size_t id) { return arena_[id]; }
  void push(std::size_t id) {
    arena_.reserve_one(stack_);
    stack_.push_back(id);
  }
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::size_t pop(const char* op) {
    if (stack_.size() <= floor())
      fail(std::string(op) + " on an empty stack" + (marks_.empty() ? "" : " (above the last MARK)"));
    const std::size_t id = stack_.back();
    stack_.pop_back();
    return id;
  }
  std::size_t top(const char* op) {
    if (stack_.size() <= floor()) fail(std::string(op) + " on an empty stack");
    return stack_.back();
  }
  // Closes the last MARK; the values above it are stack_[returned position, end).
  std::size_t close_mark(const char* op) {
    if (marks_.empty()) fail(std::string(op) + " without a MARK");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  // The values above the last MARK, popped.
  std::vector<std::size_t> pop_mark(const char* op) {
    const std::size_t m = close_mark(op);
    std::vector<std::size_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  // The container below the values above a closed MARK at `m` (APPENDS, SETITEMS).
  std::size_t below_mark(std::size_t m, const char* op) {
    if (m <= floor()) fail(std::string(op) + " on an empty stack");
    return stack_[m - 1];
  }
  std::size_t global(std::string_view module, std::string_view name) {
    static const char* const kStorageNames[] = {"FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage",
                                                "LongStorage",  "IntStorage",    "ShortStorage", "CharStorage",
                                                "ByteStorage",  "BoolStorage"};
    std::int64_t id = 0;
    std::string_view stored;  // the name kept (a static string: the pickle's bytes may be a GLOBAL line)
    if (module == "collections" && name == "OrderedDict") id = kOrderedDict, stored = "OrderedDict";
    else if (module == "torch._utils" && name == "_rebuild_tensor_v2") id = kRebuildTensorV2, stored = "_rebuild_tensor_v2";
    else if (module == "torch._utils" && name == "_rebuild_parameter") id = kRebuildParameter, stored = "_rebuild_parameter";
    else if (module == "torch")
      for (const char* s : kStorageNames)
        if (name == s) id = kStorageType, stored = s;
    if (id == 0) {
      const std::string full = std::string(module.substr(0, kMaxGlobalLine)) + "." + std::string(name.substr(0, kMaxGlobalLine));
      const bool module_class = module.rfind("torch.nn.", 0) == 0 || module == "__main__";
      fail("refusing global '" + full +
           "': a state dict needs only collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
           "torch._utils._rebuild_parameter and torch.*Storage" +
           (module_class ? std::string("; the file looks like a pickled nn.Module (torch.save(model)): save "
                                       "model.state_dict() instead")
                         : std::string()));
    }
    const std::size_t v = arena_.make(Kind::Global, id);
    val(v).s = stored;
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

  // Arguments are checked by count before they are read: a GET'd tuple of a million items
  // costs nothing to refuse.
  std::size_t reduce(std::size_t callable, std::size_t args) {
    if (val(callable).kind != Kind::Global)
      fail(std::string("REDUCE calls a ") + pickle_kind_name(val(callable).kind) + ", not an allowed global");
    if (val(args).kind != Kind::Tuple)
      fail(std::string("REDUCE arguments are a ") + pickle_kind_name(val(args).kind) + ", not a tuple");
    const std::size_t count = val(args).items.size();
    std::array<std::size_t, 7> a{};
    std::copy_n(val(args).items.begin(), std::min<std::size_t>(count, a.size()), a.begin());
    switch (val(callable).i) {
      case kOrderedDict: {
        if (count != 0) fail("collections.OrderedDict called with " + std::to_string(count) + " arguments (expected none)");
        const std::size_t d = arena_.make(Kind::Dict);
        val(d).ordered = true;
        return d;
      }
      case kRebuildTensorV2: {
        if (count != 6 && count != 7)
          fail("_rebuild_tensor_v2 called with " + std::to_string(count) + " arguments (expected 6 or 7)");
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
        if (count == 7 && val(a[6]).kind != Kind::Dict && val(a[6]).kind != Kind::None)
          fail("_rebuild_tensor_v2's metadata is neither a dict nor None");
        return arena_.make(Kind::Tensor, static_cast<std::int64_t>(arena_.tensor(std::move(t))));
      }
      case kRebuildParameter: {
        if (count != 3) fail("_rebuild_parameter called with " + std::to_string(count) + " arguments (expected 3)");
        if (val(a[0]).kind != Kind::Tensor) fail("_rebuild_parameter's data is not a tensor");
        if (val(a[1]).kind != Kind::Bool) fail("_rebuild_parameter's requires_grad is not a bool");
        return a[0];
      }
      default:
        fail("REDUCE calls torch." + std::string(val(callable).s) + ", which is not callable here");
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
    if (key.s.size() > kMaxStorageName || loc.s.size() > kMaxStorageName)
      fail("persistent id's " + std::string(key.s.size() > kMaxStorageName ? "key" : "location") + " is " +
           std::to_string(std::max(key.s.size(), loc.s.size())) + " bytes long (at most 64)");
    const std::int64_t numel = int_arg(t.items[4], "persistent id's numel");
    if (numel < 0) fail("persistent id's numel is negative (" + std::to_string(numel) + ")");
    const auto [index, added] =
        arena_.storage(key.i, {std::string(type.s), std::string(key.s), std::string(loc.s), numel});
    if (!added) {
      const PickleStorage& s = arena_.result().storages[index];
      if (s.type != type.s || s.numel != numel)
        fail("storage '" + std::string(key.s) + "' appears as " + s.type + " of " + std::to_string(s.numel) +
             " elements and as " + std::string(type.s) + " of " + std::to_string(numel));
    }
    return arena_.make(Kind::Storage, static_cast<std::int64_t>(index));
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
      case '(':
        arena_.reserve_one(marks_);
        marks_.push_back(stack_.size());
        return false;
      case '0': pop("POP"); return false;
      case '1': pop_mark("POP_MARK"); return false;
      case '2': push(top("DUP")); return false;
      case 'N': push(arena_.none()); return false;
      case 0x88: push(arena_.boolean(true)); return false;
      case 0x89: push(arena_.boolean(false)); return false;
      case 'K': push(arena_.integer(static_cast<std::int64_t>(read_le(1, "BININT1 argument")))); return false;
      case 'M': push(arena_.integer(static_cast<std::int64_t>(read_le(2, "BININT2 argument")))); return false;
      case 'J':
        push(arena_.integer(static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(4, "BININT argument")))));
        return false;
      case 0x8a: push(arena_.integer(read_long(read_le(1, "LONG1 length")))); return false;
      case 0x8b: push(arena_.integer(read_long(read_le(4, "LONG4 length")))); return false;
      case 'G': {
        const std::uint8_t* b = take(8, "BINFLOAT argument");
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | b[i];  // big-endian
        const std::size_t id = arena_.make(Kind::Float);
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
        if (len > n_ - pos_)
          fail("truncated string: declares " + std::to_string(len) + " bytes, " + std::to_string(n_ - pos_) + " remain");
        const auto* text = reinterpret_cast<const char*>(take(static_cast<std::size_t>(len), "string"));
        push(arena_.string(std::string_view(text, static_cast<std::size_t>(len))));
        return false;
      }
      case ')': push(arena_.tuple({})); return false;
      case 't': push(arena_.tuple(pop_mark("TUPLE"))); return false;
      case 0x85:
      case 0x86:
      case 0x87: {
        const std::size_t k = op - 0x84u;
        std::vector<std::size_t> items(k);
        for (std::size_t i = k; i-- > 0;) items[i] = pop(pickle_opcode_name(op));
        push(arena_.tuple(std::move(items)));
        return false;
      }
      case ']': push(arena_.make(Kind::List)); return false;
      case 'l': {
        std::vector<std::size_t> items = pop_mark("LIST");
        arena_.charge(items.size() * sizeof(std::size_t));
        const std::size_t id = arena_.make(Kind::List);
        val(id).items = std::move(items);
        push(id);
        return false;
      }
      case 'a': {
        const std::size_t item = pop("APPEND");
        arena_.append(top("APPEND"), item, "APPEND");
        return false;
      }
      case 'e': {
        const std::size_t m = close_mark("APPENDS");
        const std::size_t list = below_mark(m, "APPENDS");
        for (std::size_t i = m; i < stack_.size(); ++i) arena_.append(list, stack_[i], "APPENDS");
        stack_.resize(m);
        return false;
      }
      case '}': push(arena_.make(Kind::Dict)); return false;
      case 'd': {
        const std::size_t m = close_mark("DICT");
        if ((stack_.size() - m) % 2) fail("DICT with an odd number of items");
        const std::size_t id = arena_.make(Kind::Dict);
        for (std::size_t i = m; i < stack_.size(); i += 2) arena_.set_item(id, stack_[i], stack_[i + 1], "DICT");
        stack_.resize(m);
        push(id);
        return false;
      }
      case 's': {
        const std::size_t v = pop("SETITEM");
        const std::size_t k = pop("SETITEM");
        arena_.set_item(top("SETITEM"), k, v, "SETITEM");
        return false;
      }
      case 'u': {
        const std::size_t m = close_mark("SETITEMS");
        if ((stack_.size() - m) % 2) fail("SETITEMS with an odd number of items");
        const std::size_t d = below_mark(m, "SETITEMS");
        for (std::size_t i = m; i < stack_.size(); i += 2) arena_.set_item(d, stack_[i], stack_[i + 1], "SETITEMS");
        stack_.resize(m);
        return false;
      }
      case 'q':
      case 'r': {
        const std::uint64_t index = op == 'q' ? read_le(1, "BINPUT index") : read_le(4, "LONG_BINPUT index");
        arena_.memo_put(index, top("memo store"));
        return false;
      }
      case 0x94: arena_.memo_put(arena_.memo_stored(), top("memo store")); return false;
      case 'h': push(arena_.memo_get(read_le(1, "BINGET index"))); return false;
      case 'j': push(arena_.memo_get(read_le(4, "LONG_BINGET index"))); return false;
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
        const char* name = pickle_opcode_name(op);
        fail("unsupported pickle opcode " + hex_byte(op) + (name ? std::string(" (") + name + ")" : std::string()) +
             ": a state dict needs only the opcodes listed in io/torch_pickle.h");
      }
    }
  }

  PickleArena arena_;
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0, op_pos_ = 0;
  std::vector<std::size_t> stack_;
  std::vector<std::size_t> marks_;
};

}  // namespace

TorchPickle unpickle_torch(const std::uint8_t* data, std::size_t size) { return Unpickler(data, size).run(); }

}  // namespace tapegrad::io
