// tapegrad_convert: checkpoints of other frameworks as tapegrad safetensors files, and
// tapegrad checkpoints as ONNX models.
//
//   tapegrad_convert torch IN.pt OUT.safetensors [--strip-prefix P]... [--rename OLD=NEW]...
//                    [--half-to-float32] [--entry KEY] [--max-bytes N]
//   tapegrad_convert onnx CHECKPOINT OUT.onnx [--fuse-batch-norm] [--no-fold-preprocessing]
//
// Each subcommand is one entry of kCommands. Exit status: 0 done, 1 the input was refused or
// the output could not be written (nothing is written then), 2 bad usage.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "onnx_convert.h"
#include <tapegrad/io/torch_convert.h>

namespace {

struct Usage : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

const char* kTorchUsage =
    "tapegrad_convert torch IN.pt OUT.safetensors [options]\n"
    "  Writes the state dict of a PyTorch torch.save file as safetensors with the same keys.\n"
    "  --strip-prefix P     remove prefix P from the keys that have it (e.g. module.), repeatable\n"
    "  --rename OLD=NEW     rename key path OLD (a key, or a leading path before a '.'), repeatable\n"
    "  --half-to-float32    convert float16 / bfloat16 tensors to float32 (refused otherwise)\n"
    "  --entry KEY          the state dict under KEY of a checkpoint dict (e.g. state_dict)\n"
    "  --max-bytes N        allocation limit of the reader (default 4 x the file's size + 1 MiB)\n";

// A numeric option's value: decimal digits only, from 1 to 2^64 - 1 (overflow-checked).
std::uint64_t parse_count(const std::string& option, const std::string& v) {
  const std::string expected = option + ": expected an integer from 1 to 18446744073709551615, got '" + v + "'";
  if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string::npos) throw Usage(expected);
  std::uint64_t n = 0;
  for (char c : v) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (n > (UINT64_MAX - d) / 10) throw Usage(expected);
    n = 10 * n + d;
  }
  if (n == 0) throw Usage(expected);
  return n;
}

// Writing OUT over IN (the same path, a link to it, or another spelling of it) would replace
// the only copy of the input: refused before anything is read.
void check_not_input(const std::string& in, const std::string& out) {
  std::error_code ec;
  if (std::filesystem::equivalent(in, out, ec))
    throw Usage("the output '" + out + "' is the input file '" + in + "'; writing it would destroy the input");
}

// An option's value: the argument after it.
using Value = std::function<const std::string&()>;

// A subcommand's arguments: -h/--help prints `usage` and gives no files; each option goes to
// take_option(name, value), which returns false for one it does not know (refused, as is any
// other "--" argument); the rest must be two files, `files` naming them, the output not the input.
std::vector<std::string> file_arguments(const std::vector<std::string>& args, const char* usage,
                                        const std::string& files,
                                        const std::function<bool(const std::string&, const Value&)>& take_option) {
  std::vector<std::string> positional;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const Value value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw Usage(a + " needs a value");
      return args[++i];
    };
    if (take_option(a, value)) continue;
    if (a == "-h" || a == "--help") {
      std::cout << usage;
      return {};
    }
    if (a.rfind("--", 0) == 0) throw Usage("unknown option '" + a + "'");
    positional.push_back(a);
  }
  if (positional.size() != 2)
    throw Usage("expected " + files + ", got " + std::to_string(positional.size()) + " file arguments");
  check_not_input(positional[0], positional[1]);
  return positional;
}

int run_torch(const std::vector<std::string>& args) {
  tapegrad::io::LoadOptions o;
  const auto take_option = [&](const std::string& a, const Value& value) {
    if (a == "--strip-prefix") o.strip_prefixes.push_back(value());
    else if (a == "--rename") o.renames.push_back(tapegrad::layers::parse_key_rename(value()));
    else if (a == "--half-to-float32") o.half_to_float32 = true;
    else if (a == "--entry") o.entry = value();
    else if (a == "--max-bytes") o.max_bytes = parse_count(a, value());
    else return false;
    return true;
  };
  const auto files = file_arguments(args, kTorchUsage, "IN.pt and OUT.safetensors", take_option);
  if (!files.empty()) std::cout << tapegrad::io::convert_torch_to_safetensors(files[0], files[1], o) << "\n";
  return 0;
}

const char* kOnnxUsage =
    "tapegrad_convert onnx CHECKPOINT OUT.onnx [options]\n"
    "  Exports a train_fashion_mnist checkpoint (its fmnist.* metadata names the architecture) in\n"
    "  eval mode as ONNX (opset 17): input (N, 784) pixels / 255, output (N, 10) logits.\n"
    "  --fuse-batch-norm        fold each BatchNorm into the Linear/Conv2d before it\n"
    "  --no-fold-preprocessing  leave the standardisation out of the graph (the input is then\n"
    "                           (pixels / 255 - mean) / std; the model's metadata says so)\n";

int run_onnx(const std::vector<std::string>& args) {
  fmnist::OnnxConvertOptions o;
  const auto take_option = [&](const std::string& a, const Value&) {
    if (a == "--fuse-batch-norm") o.fuse_batch_norm = true;
    else if (a == "--no-fold-preprocessing") o.fold_preprocessing = false;
    else return false;
    return true;
  };
  const auto files = file_arguments(args, kOnnxUsage, "CHECKPOINT and OUT.onnx", take_option);
  if (!files.empty()) std::cout << fmnist::convert_checkpoint_to_onnx(files[0], files[1], o) << "\n";
  return 0;
}

struct Command {
  const char* name;
  const char* usage;
  std::function<int(const std::vector<std::string>&)> run;
};
const std::vector<Command> kCommands = {
    {"torch", kTorchUsage, run_torch},
    {"onnx", kOnnxUsage, run_onnx},
};

void print_usage(std::ostream& out) {
  out << "usage: tapegrad_convert COMMAND ...\ncommands:\n";
  for (const auto& c : kCommands) out << "  " << c.usage;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(std::cerr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help") {
    print_usage(std::cout);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(std::vector<std::string>(argv + 2, argv + argc));
    } catch (const Usage& e) {
      std::cerr << "tapegrad_convert " << name << ": " << e.what() << "\n" << c.usage;
      return 2;
    } catch (const std::invalid_argument& e) {
      std::cerr << "tapegrad_convert " << name << ": " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      std::cerr << "tapegrad_convert " << name << ": " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "tapegrad_convert: unknown command '" << name << "'\n";
  print_usage(std::cerr);
  return 2;
}
