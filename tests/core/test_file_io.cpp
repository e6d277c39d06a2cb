// Safe output files (core/file_io.h): what an atomic save may write over, symlinks written
// through, file modes kept, devices / folders / FIFOs / sockets refused, output paths
// checked before any work. Every save (layers::save, training checkpoints, write_idx, the
// CLIs' CSV and summaries) goes through atomic_write_file.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <tapegrad/core/file_io.h>
#include <tapegrad/core/safetensors.h>
#include <tapegrad/data/idx.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/optim/training_checkpoint.h>

#include "temp_dir_support.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

using Dir = tapegrad::test::TempDir;

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void put(const std::string& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

mode_t lmode(const std::string& p) {
  struct stat st;
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode;
}

std::size_t entries(const fs::path& d) {
  std::size_t n = 0;
  for (auto& e : fs::directory_iterator(d)) (void)e, ++n;
  return n;
}

}  // namespace

TEST_CASE("atomic_write_file creates a new file and replaces a regular one, keeping its mode", "[file_io]") {
  Dir d;
  const std::string p = d.file("out.csv");
  atomic_write_file(p, "a,b\n");
  CHECK(slurp(p) == "a,b\n");
  REQUIRE(::chmod(p.c_str(), 0640) == 0);
  atomic_write_file(p, "a,b\n1,2\n");
  CHECK(slurp(p) == "a,b\n1,2\n");
  CHECK((lmode(p) & 07777) == 0640);  // a plain rename of a fresh temp file gave 0644
  REQUIRE(::chmod(p.c_str(), 0600) == 0);
  atomic_write_file(p, "x");
  CHECK((lmode(p) & 07777) == 0600);
  CHECK(entries(d.path) == 1);  // no temp file left
}

TEST_CASE("a symlink is written through to its target, atomically in the target's folder", "[file_io]") {
  Dir d;
  fs::create_directories(d.path / "runs" / "3");
  const std::string target = d.file("runs/3/model.safetensors");
  put(target, "old");
  REQUIRE(::chmod(target.c_str(), 0604) == 0);

  SECTION("relative link") { fs::create_symlink("runs/3/model.safetensors", d.path / "latest"); }
  SECTION("absolute link") { fs::create_symlink(target, d.path / "latest"); }
  SECTION("a chain of links") {
    fs::create_symlink("runs/3/model.safetensors", d.path / "hop");
    fs::create_symlink("hop", d.path / "latest");
  }
  const std::string link = d.file("latest");
  CHECK(resolve_output_file(link) == fs::path(target).lexically_normal().string());
  atomic_write_file(link, "new");
  CHECK(S_ISLNK(lmode(link)));  // the link is still a link (a rename over it replaced it)
  CHECK(slurp(target) == "new");
  CHECK((lmode(target) & 07777) == 0604);
  CHECK(entries(d.path / "runs" / "3") == 1);
}

TEST_CASE("a dangling symlink creates its target; a link loop is refused", "[file_io]") {
  Dir d;
  fs::create_directories(d.path / "sub");
  fs::create_symlink("sub/new.bin", d.path / "link");
  atomic_write_file(d.file("link"), "data");
  CHECK(S_ISLNK(lmode(d.file("link"))));
  CHECK(slurp(d.file("sub/new.bin")) == "data");

  fs::create_symlink("b", d.path / "a");
  fs::create_symlink("a", d.path / "b");
  CHECK_THROWS_WITH(atomic_write_file(d.file("a"), "x"), Catch::Contains("too many levels of symbolic links"));
  CHECK_THROWS_WITH(check_output_file(d.file("a")), Catch::Contains("too many levels"));
  CHECK(S_ISLNK(lmode(d.file("a"))));
}

TEST_CASE("anything but a regular file is refused and left untouched", "[file_io]") {
  Dir d;
  SECTION("a directory") {
    fs::create_directories(d.path / "folder");
    put(d.file("folder/keep"), "k");
    CHECK_THROWS_WITH(atomic_write_file(d.file("folder"), "x"), Catch::Contains("is a directory"));
    CHECK_THROWS_WITH(check_output_file(d.file("folder")), Catch::Contains("is a directory"));
    CHECK(fs::is_directory(d.path / "folder"));
    CHECK(slurp(d.file("folder/keep")) == "k");
  }
  SECTION("a FIFO") {
    REQUIRE(::mkfifo(d.file("fifo").c_str(), 0600) == 0);
    CHECK_THROWS_WITH(atomic_write_file(d.file("fifo"), "x"), Catch::Contains("is a FIFO"));
    CHECK(S_ISFIFO(lmode(d.file("fifo"))));
  }
  SECTION("a socket") {
    const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(s >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string p = d.file("sock");
    REQUIRE(p.size() < sizeof addr.sun_path);
    std::strcpy(addr.sun_path, p.c_str());
    REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    CHECK_THROWS_WITH(atomic_write_file(p, "x"), Catch::Contains("is a socket"));
    CHECK(S_ISSOCK(lmode(p)));
    ::close(s);
  }
  SECTION("a character device, directly and through a symlink") {
    // /dev/null itself: a save there turned the device node into a regular file (as root).
    CHECK_THROWS_WITH(atomic_write_file("/dev/null", "x"), Catch::Contains("is a character device"));
    CHECK(S_ISCHR(lmode("/dev/null")));
    fs::create_symlink("/dev/null", d.path / "null_link");
    CHECK_THROWS_WITH(atomic_write_file(d.file("null_link"), "x"),
                      Catch::Contains("link target '/dev/null'") && Catch::Contains("character device"));
    CHECK_THROWS_WITH(check_output_file(d.file("null_link")), Catch::Contains("character device"));
    if (::mknod(d.file("chr").c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0) {  // root only
      CHECK_THROWS_WITH(atomic_write_file(d.file("chr"), "x"), Catch::Contains("is a character device"));
      CHECK(S_ISCHR(lmode(d.file("chr"))));
    }
  }
  SECTION("every save entry point refuses the same way") {
    REQUIRE(::mkfifo(d.file("fifo").c_str(), 0600) == 0);
    layers::Linear lin(2, 3);
    CHECK_THROWS_WITH(layers::save(lin, d.file("fifo")), Catch::Contains("is a FIFO"));
    CHECK_THROWS_WITH(save_safetensors(d.file("fifo"), {{"w", Tensor::zeros({2})}}), Catch::Contains("is a FIFO"));
    optim::SGD opt(lin.parameters(), optim::SGDOptions{});
    CHECK_THROWS_WITH(optim::save_training_checkpoint(d.file("fifo"), lin, opt, 1), Catch::Contains("is a FIFO"));
    data::IdxArray a;
    a.type = data::IdxType::UInt8;
    a.dims = {2};
    a.payload = {1, 2};
    CHECK_THROWS_WITH(data::write_idx(d.file("fifo"), a, true), Catch::Contains("is a FIFO"));
    CHECK_THROWS_WITH(data::write_idx(d.file("fifo"), a, false), Catch::Contains("is a FIFO"));
    CHECK(S_ISFIFO(lmode(d.file("fifo"))));
  }
  CHECK_FALSE(fs::exists(d.path / ".x.tmp"));
}

TEST_CASE("write_idx is atomic and still reads back, gzip or plain", "[file_io]") {
  Dir d;
  data::IdxArray a;
  a.type = data::IdxType::UInt8;
  a.dims = {2, 3};
  a.payload = {1, 2, 3, 4, 5, 6};
  for (bool gz : {true, false}) {
    const std::string p = d.file(gz ? "a.idx.gz" : "a.idx");
    data::write_idx(p, a, gz);
    const auto back = data::read_idx(p);
    CHECK(back.dims == a.dims);
    CHECK(back.payload == a.payload);
  }
  CHECK(entries(d.path) == 2);
}

TEST_CASE("a symlink owned by someone else in a sticky shared folder is not followed", "[file_io]") {
  if (::geteuid() != 0) {
    WARN("needs root to give a link another owner");
    return;
  }
  Dir d;
  fs::create_directories(d.path / "shared");
  REQUIRE(::chmod((d.path / "shared").c_str(), 01777) == 0);
  put(d.file("victim"), "precious");
  fs::create_symlink(d.file("victim"), d.path / "shared" / "out.safetensors");
  REQUIRE(::lchown(d.file("shared/out.safetensors").c_str(), 65534, 65534) == 0);
  CHECK_THROWS_WITH(atomic_write_file(d.file("shared/out.safetensors"), "x"),
                    Catch::Contains("owned by another user") && Catch::Contains("refusing to follow"));
  CHECK(slurp(d.file("victim")) == "precious");
}

TEST_CASE("check_output_file and check_output_dir report unusable paths before any work", "[file_io]") {
  Dir d;
  CHECK_NOTHROW(check_output_file(d.file("new.safetensors")));
  CHECK_FALSE(fs::exists(d.path / "new.safetensors"));
  CHECK(entries(d.path) == 0);  // the probe is removed
  CHECK_THROWS_WITH(check_output_file(d.file("missing/x.safetensors")), Catch::Contains("does not exist"));
  put(d.file("plain"), "p");
  CHECK_THROWS_WITH(check_output_file(d.file("plain/x.safetensors")), Catch::Contains("not a folder"));
  CHECK_THROWS_WITH(check_output_file(""), Catch::Contains("empty"));
  CHECK_THROWS_WITH(check_output_file("/proc/tapegrad_cannot_write_here"), Catch::Contains("cannot"));

  check_output_dir(d.file("a/b/c"));
  CHECK(fs::is_directory(d.path / "a" / "b" / "c"));
  CHECK(entries(d.path / "a" / "b" / "c") == 0);
  CHECK_THROWS_WITH(check_output_dir(d.file("plain")), Catch::Contains("it is a regular file, not a folder"));
  CHECK_THROWS_WITH(check_output_dir("/proc"), Catch::Contains("cannot create a temp file in the folder '/proc'"));
  CHECK_THROWS_WITH(check_output_dir("/dev/null"), Catch::Contains("character device"));
  if (::geteuid() != 0) {
    fs::create_directories(d.path / "ro");
    REQUIRE(::chmod((d.path / "ro").c_str(), 0500) == 0);
    CHECK_THROWS_WITH(check_output_dir(d.file("ro")), Catch::Contains("Permission denied"));
    CHECK_THROWS_WITH(check_output_file(d.file("ro/x")), Catch::Contains("Permission denied"));
  }
}

TEST_CASE("load_safetensors refuses a folder or a device with a clear error", "[file_io][checkpoint]") {
  Dir d;
  // A folder used to give std::bad_alloc (its size read as 2^63 - 1).
  CHECK_THROWS_WITH(load_safetensors(d.path.string()), Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(load_safetensors("/dev/zero"), Catch::Contains("is a character device"));
  layers::Linear lin(2, 3);
  CHECK_THROWS_WITH(layers::load(lin, d.path.string()), Catch::Contains("is a directory"));
}
