// ImageFolder: the folder walk, lazy decoding, the channel conversions, bilinear resize and
// the class-name metadata.
#include <tapegrad/data/image_folder.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <tapegrad/data/describe.h>

namespace tapegrad::data {
namespace fs = std::filesystem;
namespace {

bool is_image_name(const std::string& name) {
  std::string ext = fs::path(name).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// Entries of `dir` (names, sorted), directories or regular files only, hidden ones skipped.
std::vector<std::string> sorted_entries(const fs::path& dir, bool directories) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code tec;
    if (directories ? it->is_directory(tec) : (it->is_regular_file(tec) && is_image_name(name))) names.push_back(name);
  }
  if (ec) throw std::runtime_error("ImageFolder: cannot list '" + dir.string() + "': " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

void check_options(const ImageFolderOptions& o) {
  if (!o.size.empty() && (o.size.size() != 2 || o.size[0] < 1 || o.size[1] < 1))
    throw std::invalid_argument("ImageFolder: size must be (H, W) with H, W >= 1, got " + tuple_str(o.size));
  if (o.channels != 0 && o.channels != 1 && o.channels != 3)
    throw std::invalid_argument("ImageFolder: channels must be 0 (as in the files), 1 or 3, got " +
                                std::to_string(o.channels));
}

}  // namespace

Image8 convert_channels(const Image8& img, std::int64_t channels) {
  if (channels == 0 || channels == img.channels) return img;
  if (channels != 1 && channels != 3)
    throw std::invalid_argument("convert_channels: expected 0, 1 or 3 channels, got " + std::to_string(channels));
  Image8 out;
  out.height = img.height;
  out.width = img.width;
  out.channels = channels;
  const std::int64_t n = img.height * img.width, c = img.channels;
  out.pixels.resize(static_cast<std::size_t>(n * channels));
  for (std::int64_t p = 0; p < n; ++p) {
    const std::uint8_t* in = img.pixels.data() + p * c;
    std::uint8_t* o = out.pixels.data() + p * channels;
    if (channels == 1) {  // c is 3 or 4: PIL's L24 (fixed-point ITU-R 601-2 luma, rounded)
      o[0] = static_cast<std::uint8_t>((in[0] * 19595u + in[1] * 38470u + in[2] * 7471u + 0x8000u) >> 16);
    } else if (c == 1) {
      o[0] = o[1] = o[2] = in[0];
    } else {
      o[0] = in[0], o[1] = in[1], o[2] = in[2];
    }
  }
  return out;
}

Tensor read_image(const std::string& path, const ImageFolderOptions& options) {
  check_options(options);
  Tensor t = image_to_tensor(convert_channels(read_image8(path, options.max_pixels), options.channels));
  if (!options.size.empty() && (t.size(1) != options.size[0] || t.size(2) != options.size[1]))
    t = resize(t, options.size);
  return t;
}

ImageFolder::ImageFolder(std::string root, ImageFolderOptions options)
    : root_(std::move(root)), options_(std::move(options)) {
  check_options(options_);
  std::error_code ec;
  if (!fs::is_directory(root_, ec))
    throw std::runtime_error("ImageFolder: '" + root_ + "' is not a folder" + (ec ? ": " + ec.message() : ""));
  classes_ = sorted_entries(root_, true);
  if (classes_.empty())
    throw std::runtime_error("ImageFolder: '" + root_ + "' holds no class subfolder (expected root/<class>/<image>)");
  for (std::size_t k = 0; k < classes_.size(); ++k) {
    if (classes_[k].find('\n') != std::string::npos)
      throw std::invalid_argument("ImageFolder: class folder name holds a newline: '" + classes_[k] + "'");
    const fs::path dir = fs::path(root_) / classes_[k];
    const std::vector<std::string> names = sorted_entries(dir, false);
    if (names.empty())
      throw std::runtime_error("ImageFolder: class folder '" + dir.string() + "' holds no .png, .jpg or .jpeg file");
    for (const std::string& n : names) {
      files_.push_back((dir / n).string());
      targets_.push_back(static_cast<std::int64_t>(k));
    }
  }
  sample_shape_.clear();
  sample_shape_ = get(0).shape();
}

const std::string& ImageFolder::path(std::int64_t i) const {
  if (i < 0 || i >= size())
    throw std::out_of_range("ImageFolder: sample " + std::to_string(i) + " outside 0 .. " + std::to_string(size() - 1));
  return files_[static_cast<std::size_t>(i)];
}

std::int64_t ImageFolder::target(std::int64_t i) const {
  path(i);  // the range check
  return targets_[static_cast<std::size_t>(i)];
}

Tensor ImageFolder::get(std::int64_t i) const {
  const std::string& file = path(i);
  Tensor t = read_image(file, options_);
  if (!sample_shape_.empty() && t.shape() != sample_shape_)
    throw std::runtime_error("ImageFolder: '" + file + "' is " + tuple_str(t.shape()) + " (C, H, W), the first image '" +
                             files_[0] + "' is " + tuple_str(sample_shape_) +
                             "; ask for a common size (ImageFolderOptions::size) or channels to mix them");
  return t;
}

Dataset ImageFolder::load(const std::vector<std::int64_t>& indices) const {
  Shape xs{static_cast<std::int64_t>(indices.size())};
  xs.insert(xs.end(), sample_shape_.begin(), sample_shape_.end());
  Tensor X = Tensor::empty(xs, Dtype::Float32);
  std::vector<std::int64_t> y;
  y.reserve(indices.size());
  const std::int64_t per = X.numel() / std::max<std::int64_t>(1, xs[0]);
  float* out = X.data<float>();
  for (std::size_t b = 0; b < indices.size(); ++b) {
    const Tensor s = get(indices[b]);
    std::copy(s.data<float>(), s.data<float>() + per, out + static_cast<std::int64_t>(b) * per);
    y.push_back(targets_[static_cast<std::size_t>(indices[b])]);
  }
  return Dataset::make(X, Tensor::from_int64(y, {static_cast<std::int64_t>(y.size())}), classes_);
}

Dataset ImageFolder::load() const {
  std::vector<std::int64_t> all(files_.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  return load(all);
}

Tensor resize(const Tensor& image, const Shape& size) {
  check_float_image("resize", image);
  if (size.size() != 2 || size[0] < 1 || size[1] < 1)
    throw std::invalid_argument("resize: size must be (H, W) with H, W >= 1, got " + tuple_str(size));
  const std::int64_t C = image.size(0), H = image.size(1), W = image.size(2), OH = size[0], OW = size[1];
  if (H < 1 || W < 1) throw std::invalid_argument("resize: cannot resize an empty image " + tuple_str(image.shape()));
  Tensor out = Tensor::empty({C, OH, OW}, Dtype::Float32);
  const float* src = image.data<float>();
  float* dst = out.data<float>();
  // source coordinate and the two neighbours' weights, per output row / column
  auto axis = [](std::int64_t n_out, std::int64_t n_in, std::vector<std::int64_t>& i0, std::vector<std::int64_t>& i1,
                 std::vector<float>& w1) {
    const float scale = static_cast<float>(n_in) / static_cast<float>(n_out);
    for (std::int64_t o = 0; o < n_out; ++o) {
      float s = (static_cast<float>(o) + 0.5f) * scale - 0.5f;
      if (s < 0) s = 0;
      std::int64_t a = std::min<std::int64_t>(static_cast<std::int64_t>(s), n_in - 1);
      i0.push_back(a);
      i1.push_back(std::min<std::int64_t>(a + 1, n_in - 1));
      w1.push_back(s - static_cast<float>(a));
    }
  };
  std::vector<std::int64_t> y0, y1, x0, x1;
  std::vector<float> wy, wx;
  axis(OH, H, y0, y1, wy);
  axis(OW, W, x0, x1, wx);
  for (std::int64_t c = 0; c < C; ++c) {
    const float* p = src + c * H * W;
    for (std::int64_t y = 0; y < OH; ++y) {
      const float* r0 = p + y0[y] * W;
      const float* r1 = p + y1[y] * W;
      const float b = wy[y], a = 1.0f - b;
      for (std::int64_t x = 0; x < OW; ++x) {
        const float d = wx[x], e = 1.0f - d;
        dst[(c * OH + y) * OW + x] = a * (e * r0[x0[x]] + d * r0[x1[x]]) + b * (e * r1[x0[x]] + d * r1[x1[x]]);
      }
    }
  }
  return out;
}

std::map<std::string, std::string> class_names_metadata(const std::vector<std::string>& names) {
  if (names.empty()) throw std::invalid_argument("class_names_metadata: no class names");
  std::string joined;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty() || names[i].find('\n') != std::string::npos)
      throw std::invalid_argument("class_names_metadata: class " + std::to_string(i) +
                                  " has an empty name or one holding a newline: '" + names[i] + "'");
    joined += (i ? "\n" : "") + names[i];
  }
  return {{kClassNamesKey, joined}};
}

std::vector<std::string> class_names_from_metadata(const std::map<std::string, std::string>& metadata) {
  const auto it = metadata.find(kClassNamesKey);
  if (it == metadata.end())
    throw std::invalid_argument(std::string("class_names_from_metadata: no \"") + kClassNamesKey +
                                "\" key in the metadata (a checkpoint saved without class names)");
  std::vector<std::string> names;
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = it->second.find('\n', start);
    names.push_back(it->second.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (names.back().empty())
      throw std::invalid_argument("class_names_from_metadata: class " + std::to_string(names.size() - 1) +
                                  " has an empty name");
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return names;
}

}  // namespace tapegrad::data
