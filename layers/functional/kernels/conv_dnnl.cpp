// oneDNN convolution glue: cached primitives, plain user layouts, reorders to and from the
// layouts oneDNN picks. See conv_dnnl.h.
#include <tapegrad/layers/functional/kernels/conv_dnnl.h>

#if defined(TAPEGRAD_HAVE_DNNL)

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <cstdlib>
#include <string>
#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <tapegrad/core/isa.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional::kernels {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

std::atomic<std::int64_t> g_created{0};

using Key = std::array<std::int64_t, 18>;
struct Entry;

// The engine and the primitive cache, created on first use and never destroyed (reachable
// until exit): no destruction-order question against oneDNN's own globals or the threads'
// streams at exit. The cache is least-recently-used: `lru` front is the newest, `index`
// finds an entry's place in it. An evicted entry lives on while a call still uses it
// (shared_ptr), so eviction by another thread never pulls primitives from under a call.
struct State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  std::size_t capacity = kDnnlConvDefaultCacheCapacity;
  std::list<std::pair<Key, std::shared_ptr<Entry>>> lru;
  std::map<Key, decltype(lru)::iterator> index;
  void evict_to(std::size_t n) {  // with mu held
    while (lru.size() > n) {
      index.erase(lru.back().first);
      lru.pop_back();
    }
  }
};
State& state();

dnnl::engine& cpu_engine() { return state().engine; }

std::int64_t pad_right(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s, std::int64_t p,
                       std::int64_t d) {
  return (out - 1) * s + (k - 1) * d + 1 - in - p;
}

// One side of a primitive: the user's plain memory and, when oneDNN wants another layout, the
// reorder between them (to the primitive for inputs, from it for outputs).
struct Port {
  memory::desc user, prim;
  std::unique_ptr<dnnl::reorder> re;
  void init(const memory::desc& u, const memory::desc& p, bool input) {
    user = u;
    prim = p;
    if (u != p) {
      auto& e = cpu_engine();
      re = std::make_unique<dnnl::reorder>(input ? dnnl::reorder::primitive_desc(e, u, e, p)
                                                 : dnnl::reorder::primitive_desc(e, p, e, u));
      ++g_created;
    }
  }
};

struct Entry {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  std::unique_ptr<dnnl::convolution_forward> fwd;
  Port f_src, f_wei, f_dst;
  std::unique_ptr<dnnl::convolution_backward_data> bwd_data;
  Port d_dst, d_wei, d_src;
  std::unique_ptr<dnnl::convolution_backward_weights> bwd_wei;
  Port w_src, w_dst, w_wei;
  std::mutex mu;  // guards the lazy creation of the backward primitives
};

struct Descs {
  memory::desc src, wei, dst, bias;
  memory::dims strides, dilates, pl, pr;
};

Descs user_descs(const DnnlConvShape& s) {
  Descs d;
  d.src = memory::desc({s.N, s.C, s.H, s.W}, dt::f32, tag::nchw);
  d.dst = memory::desc({s.N, s.O, s.OH, s.OW}, dt::f32, tag::nchw);
  d.wei = s.G == 1 ? memory::desc({s.O, s.C, s.kh, s.kw}, dt::f32, tag::oihw)
                   : memory::desc({s.G, s.O / s.G, s.C / s.G, s.kh, s.kw}, dt::f32, tag::goihw);
  d.bias = memory::desc({s.O}, dt::f32, tag::x);
  d.strides = {s.sh, s.sw};
  d.dilates = {s.dh - 1, s.dw - 1};
  d.pl = {s.ph, s.pw};
  d.pr = {pad_right(s.H, s.OH, s.kh, s.sh, s.ph, s.dh), pad_right(s.W, s.OW, s.kw, s.sw, s.pw, s.dw)};
  return d;
}

memory::desc any_like(const memory::desc& m) { return memory::desc(m.dims(), dt::f32, tag::any); }

// Activations (src, dst and their gradients) in oneDNN's preferred layout (default), or
// plain NCHW with TAPEGRAD_DNNL_LAYOUT=plain (no reorders; for measurement).
bool plain_activations() {
  static const bool plain = [] {
    const char* v = std::getenv("TAPEGRAD_DNNL_LAYOUT");
    return v != nullptr && std::string(v) == "plain";
  }();
  return plain;
}
memory::desc act(const memory::desc& m) { return plain_activations() ? m : any_like(m); }

Key key_of(const DnnlConvShape& s, int threads) {
  return {s.N, s.C, s.H, s.W, s.O, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw, s.G, s.OH, s.OW, s.bias ? 1 : 0,
          threads};
}

// oneDNN's JIT capped at the kernels' level (core/isa.h) before its first primitive, unless
// ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) is set: the environment then decides.
void cap_dnnl_isa() {
  if (std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA")) return;
  switch (isa()) {
    case Isa::Baseline: dnnl::set_max_cpu_isa(dnnl::cpu_isa::sse41); break;
    case Isa::Avx2: dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2); break;
    case Isa::Avx512: break;
  }
}

State& state() {
  static State* const st = (cap_dnnl_isa(), new State);
  return *st;
}

// The cached primitives of this configuration (created on a miss), marked most recently used.
std::shared_ptr<Entry> entry(const DnnlConvShape& s, int threads) {
  const Key k = key_of(s, threads);
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (auto it = st.index.find(k); it != st.index.end()) {
    st.lru.splice(st.lru.begin(), st.lru, it->second);
    return it->second->second;
  }
  {
    auto e = std::make_shared<Entry>();
    const Descs d = user_descs(s);
    dnnl::convolution_forward::desc desc =
        s.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                                 act(d.src), any_like(d.wei), d.bias, act(d.dst), d.strides,
                                                 d.dilates, d.pl, d.pr)
               : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                                 act(d.src), any_like(d.wei), act(d.dst), d.strides, d.dilates,
                                                 d.pl, d.pr);
    e->fwd_pd = dnnl::convolution_forward::primitive_desc(desc, cpu_engine());
    e->fwd = std::make_unique<dnnl::convolution_forward>(e->fwd_pd);
    ++g_created;
    e->f_src.init(d.src, e->fwd_pd.src_desc(), true);
    e->f_wei.init(d.wei, e->fwd_pd.weights_desc(), true);
    e->f_dst.init(d.dst, e->fwd_pd.dst_desc(), false);
    st.lru.emplace_front(k, e);
    st.index[k] = st.lru.begin();
    // a capacity of 0 caches nothing: the entry serves this call only
    st.evict_to(st.capacity);
    return e;
  }
}

// oneDNN's OpenMP runtime runs on the calling thread's OpenMP thread count: `n`, the call's
// one reading of get_num_threads() (the same that keys its primitives).
void match_threads(int n) {
#if defined(_OPENMP)
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
#else
  (void)n;
#endif
}

dnnl::stream& cpu_stream() {
  thread_local dnnl::stream st(cpu_engine());
  return st;
}

// Scratch memory for a layout oneDNN prefers, from tapegrad's block cache.
struct Scratch {
  Tensor buf;
  memory mem;
  Scratch(const memory::desc& md) {
    buf = Tensor::empty({static_cast<std::int64_t>(md.get_size() / sizeof(float)) + 1}, Dtype::Float32);
    mem = memory(md, cpu_engine(), buf.data<float>());
  }
};

// The memory the primitive reads for an input port (reordering the user's data when needed).
memory input(Port& p, const float* user, std::unique_ptr<Scratch>& hold) {
  memory u(p.user, cpu_engine(), const_cast<float*>(user));
  if (!p.re) return u;
  hold = std::make_unique<Scratch>(p.prim);
  p.re->execute(cpu_stream(), u, hold->mem);
  return hold->mem;
}

// The memory the primitive writes for an output port; finish() copies it to the user's layout.
memory output(Port& p, float* user, std::unique_ptr<Scratch>& hold) {
  if (!p.re) return memory(p.user, cpu_engine(), user);
  hold = std::make_unique<Scratch>(p.prim);
  return hold->mem;
}
void finish(Port& p, float* user, std::unique_ptr<Scratch>& hold) {
  if (!p.re) return;
  memory u(p.user, cpu_engine(), user);
  p.re->execute(cpu_stream(), hold->mem, u);
}

}  // namespace

bool dnnl_conv_supports(const DnnlConvShape& s) {
  const Descs d = user_descs(s);
  return d.pr[0] >= 0 && d.pr[1] >= 0;
}

std::int64_t dnnl_conv_primitives_created() { return g_created.load(); }

std::size_t dnnl_conv_cache_capacity() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.capacity;
}

void dnnl_conv_set_cache_capacity(std::size_t entries) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.capacity = entries;
  st.evict_to(entries);
}

std::size_t dnnl_conv_cache_entries() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.lru.size();
}

void dnnl_conv_forward(const DnnlConvShape& s, const float* x, const float* w, const float* b, float* y) {
  const int threads = get_num_threads();
  match_threads(threads);
  const std::shared_ptr<Entry> held = entry(s, threads);
  Entry& e = *held;
  std::unique_ptr<Scratch> hs, hw, hd;
  memory src = input(e.f_src, x, hs), wei = input(e.f_wei, w, hw), dst = output(e.f_dst, y, hd);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  if (s.bias) args.insert({DNNL_ARG_BIAS, memory(user_descs(s).bias, cpu_engine(), const_cast<float*>(b))});
  e.fwd->execute(cpu_stream(), args);
  finish(e.f_dst, y, hd);
  cpu_stream().wait();
}

namespace {

void ensure_backward_data(Entry& e, const DnnlConvShape& s) {
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.bwd_data) return;
  const Descs d = user_descs(s);
  dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, act(d.src), any_like(d.wei),
                                             act(d.dst), d.strides, d.dilates, d.pl, d.pr);
  dnnl::convolution_backward_data::primitive_desc pd(desc, cpu_engine(), e.fwd_pd);
  e.bwd_data = std::make_unique<dnnl::convolution_backward_data>(pd);
  ++g_created;
  e.d_dst.init(d.dst, pd.diff_dst_desc(), true);
  e.d_wei.init(d.wei, pd.weights_desc(), true);
  e.d_src.init(d.src, pd.diff_src_desc(), false);
}

void ensure_backward_weights(Entry& e, const DnnlConvShape& s) {
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.bwd_wei) return;
  const Descs d = user_descs(s);
  auto desc = s.bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, act(d.src),
                                                                any_like(d.wei), d.bias, act(d.dst), d.strides,
                                                                d.dilates, d.pl, d.pr)
                     : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, act(d.src),
                                                                any_like(d.wei), act(d.dst), d.strides, d.dilates,
                                                                d.pl, d.pr);
  dnnl::convolution_backward_weights::primitive_desc pd(desc, cpu_engine(), e.fwd_pd);
  e.bwd_wei = std::make_unique<dnnl::convolution_backward_weights>(pd);
  ++g_created;
  e.w_src.init(d.src, pd.src_desc(), true);
  e.w_dst.init(d.dst, pd.diff_dst_desc(), true);
  e.w_wei.init(d.wei, pd.diff_weights_desc(), false);
}

}  // namespace

void dnnl_conv_backward(const DnnlConvShape& s, const float* x, const float* dy, const float* w, float* dx, float* dw, float* db) {
  const int threads = get_num_threads();
  match_threads(threads);
  const std::shared_ptr<Entry> held = entry(s, threads);
  Entry& e = *held;
  if (dx) ensure_backward_data(e, s);
  if (dw) ensure_backward_weights(e, s);
  // dy in oneDNN's layout once when both primitives want the same one
  std::unique_ptr<Scratch> h_dy, h_dy2, hw, hs, hx, hdw;
  memory ddst = input(dx ? e.d_dst : e.w_dst, dy, h_dy);
  if (dx) {
    memory wei = input(e.d_wei, w, hw), dsrc = output(e.d_src, dx, hs);
    e.bwd_data->execute(cpu_stream(), {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, dsrc}});
    finish(e.d_src, dx, hs);
  }
  if (dw) {
    memory wdst = !dx || e.w_dst.prim == e.d_dst.prim ? ddst : input(e.w_dst, dy, h_dy2);
    memory src = input(e.w_src, x, hx), dwei = output(e.w_wei, dw, hdw);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, wdst}, {DNNL_ARG_DIFF_WEIGHTS, dwei}};
    if (s.bias) args.insert({DNNL_ARG_DIFF_BIAS, memory(user_descs(s).bias, cpu_engine(), db)});
    e.bwd_wei->execute(cpu_stream(), args);
    finish(e.w_wei, dw, hdw);
  }
  cpu_stream().wait();
}

}  // namespace tapegrad::layers::functional::kernels

#else  // !TAPEGRAD_HAVE_DNNL

#include <stdexcept>

namespace tapegrad::layers::functional::kernels {
namespace {
[[noreturn]] void missing() { throw std::logic_error("conv2d: tapegrad was built without oneDNN"); }
}  // namespace
bool dnnl_conv_supports(const DnnlConvShape&) { return false; }
std::int64_t dnnl_conv_primitives_created() { return 0; }
std::size_t dnnl_conv_cache_capacity() { return 0; }
void dnnl_conv_set_cache_capacity(std::size_t) {}
std::size_t dnnl_conv_cache_entries() { return 0; }
void dnnl_conv_forward(const DnnlConvShape&, const float*, const float*, const float*, float*) { missing(); }
void dnnl_conv_backward(const DnnlConvShape&, const float*, const float*, const float*, float*, float*, float*) { missing(); }
}  // namespace tapegrad::layers::functional::kernels

#endif
