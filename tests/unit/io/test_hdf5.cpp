#include "catch.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kpipe/io/hdf5.hpp"
#include "kpipe/io/uncached_file.hpp"

namespace hdf5 = kpipe::io::hdf5;

namespace {
std::string scratch(const std::string& name) { return "kpipe-test-io-" + std::to_string(::getpid()) + "-" + name; }
}  // namespace

TEST_CASE("hdf5: serial datasets and attributes round-trip", "[io]") {
  const auto name = scratch("roundtrip.h5");
  {
    auto file = hdf5::File::create(name);
    file.set_attribute("format", "kpipe-test");
    file.set_attribute("version", std::int64_t{3});
    auto group = file.create_group("actions");
    group.write("start", std::vector<double>{0.5, 1.5, 2.5});
    group.write("kind", std::vector<std::int32_t>{1, 2, 3});
    auto matrix = group.create_dataset("matrix", hdf5::Type::float32, {2, 3});
    matrix.write(std::vector<float>{1, 2, 3, 4, 5, 6});
    matrix.set_attribute("checksum", std::uint64_t{0xfedcba9876543210ull});
    matrix.set_attribute("scale", 0.25);
    file.close();
  }
  {
    auto file = hdf5::File::open(name);
    CHECK(file.string_attribute("format") == "kpipe-test");
    CHECK(file.int_attribute("version") == 3);
    auto group = file.open_group("actions");
    CHECK(group.names() == std::vector<std::string>{"kind", "matrix", "start"});
    CHECK(group.open_dataset("start").read<double>() == std::vector<double>{0.5, 1.5, 2.5});
    CHECK(group.open_dataset("kind").type() == hdf5::Type::int32);
    auto matrix = group.open_dataset("matrix");
    CHECK(matrix.shape() == std::vector<std::uint64_t>{2, 3});
    CHECK(matrix.type() == hdf5::Type::float32);
    CHECK(matrix.uint_attribute("checksum") == 0xfedcba9876543210ull);
    CHECK(matrix.double_attribute("scale") == 0.25);
    std::vector<float> row(3);
    matrix.read_rows(row.data(), 1, 1);
    CHECK(row == std::vector<float>{4, 5, 6});
  }
  std::remove(name.c_str());
}

TEST_CASE("hdf5: failures are kpipe errors naming the file and object", "[io]") {
  const auto name = scratch("errors.h5");
  {
    auto file = hdf5::File::create(name);
    file.create_group("g");
    CHECK_THROWS_WITH(hdf5::File::create(name), Catch::Contains(name));
    CHECK_THROWS_WITH(file.open_dataset("missing"), Catch::Contains("/: no dataset 'missing'"));
    CHECK_THROWS_WITH(file.string_attribute("nothing"), Catch::Contains("no string attribute 'nothing'"));
  }
  const auto text = scratch("not-hdf5.txt");
  std::ofstream(text) << "hello\n";
  CHECK_FALSE(hdf5::is_hdf5(text));
  CHECK(hdf5::is_hdf5(name));
  try {
    hdf5::File::open(text);
    FAIL("opened a text file");
  } catch (const kpipe::Error& error) {
    CHECK(error.exit_code() == 2);
    CHECK_THAT(error.what(), Catch::Contains("not an HDF5 file"));
  }
  std::remove(name.c_str());
  std::remove(text.c_str());
}

TEST_CASE("hdf5: a string attribute longer than its reader allows fails before it is trusted", "[io]") {
  const auto name = scratch("long-attribute.h5");
  {
    auto file = hdf5::File::create(name);
    file.set_attribute("deck", std::string(100, 'x'));
    file.close();
  }
  const auto file = hdf5::File::open(name);
  CHECK(file.string_attribute("deck", 100) == std::string(100, 'x'));
  CHECK_THROWS_WITH(file.string_attribute("deck", 99),
                    Catch::Contains("attribute 'deck' holds 101 bytes, more than kpipe reads there (99)"));
  std::remove(name.c_str());
}

namespace {
// A 4 x 4 float dataset `name` in `file` written through libhdf5 itself,
// stored as `creation` and `stored_type` say.
void write_raw(hid_t file, const char* name, hid_t creation, hid_t stored_type) {
  const hsize_t extent[2] = {4, 4};
  const hid_t space = H5Screate_simple(2, extent, nullptr);
  const hid_t dataset = H5Dcreate2(file, name, stored_type, space, H5P_DEFAULT, creation, H5P_DEFAULT);
  const std::vector<float> values(16, 1.5f);
  REQUIRE(H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  H5Dclose(dataset);
  H5Sclose(space);
}
}  // namespace

// What a checkpoint's rehearsal may leave to the reader: data libhdf5 copies
// without decoding. Chunks (an index to walk), filters (a decoder) and a
// byte order to convert all make libhdf5 interpret what it reads.
TEST_CASE("hdf5: only contiguous, unfiltered, native data is stored verbatim", "[io]") {
  const auto name = scratch("verbatim.h5");
  {
    auto file = hdf5::File::create(name);
    file.create_dataset("kpipe", hdf5::Type::float32, {4, 4}).write(std::vector<float>(16, 1.5f));
    file.close();
    const hid_t raw = H5Fopen(name.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(raw >= 0);
    const hsize_t chunk[2] = {2, 2};
    const hid_t chunked = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(chunked, 2, chunk);
    write_raw(raw, "chunked", chunked, H5T_IEEE_F32LE);
    const hid_t deflated = H5Pcopy(chunked);
    H5Pset_deflate(deflated, 6);
    write_raw(raw, "deflated", deflated, H5T_IEEE_F32LE);
    write_raw(raw, "big_endian", H5P_DEFAULT, H5T_IEEE_F32BE);
    write_raw(raw, "little_endian", H5P_DEFAULT, H5T_IEEE_F32LE);
    H5Pclose(deflated);
    H5Pclose(chunked);
    H5Fclose(raw);
  }
  const auto file = hdf5::File::open(name);
  CHECK(file.open_dataset("kpipe").stored_verbatim());
  CHECK(file.open_dataset("little_endian").stored_verbatim());
  CHECK_FALSE(file.open_dataset("chunked").stored_verbatim());
  CHECK_FALSE(file.open_dataset("deflated").stored_verbatim());
  CHECK_FALSE(file.open_dataset("big_endian").stored_verbatim());

  // Where verbatim data lies, the file holds its bytes as they are in memory.
  const auto bytes = file.open_dataset("kpipe").stored_bytes();
  REQUIRE(bytes);
  REQUIRE(bytes->size == 16 * sizeof(float));
  std::vector<float> stored(16);
  std::ifstream in(name, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(bytes->offset));
  in.read(reinterpret_cast<char*>(stored.data()), static_cast<std::streamsize>(bytes->size));
  CHECK(stored == std::vector<float>(16, 1.5f));
  for (const char* other : {"chunked", "deflated", "big_endian"}) CHECK_FALSE(file.open_dataset(other).stored_bytes());
  std::remove(name.c_str());
}

// A dataset has its place in the file from its creation, and bytes written
// there without libhdf5 read back through it.
TEST_CASE("hdf5: bytes written at stored_bytes() are the dataset", "[io]") {
  const auto name = scratch("placed.h5");
  std::vector<double> values(3 * 5);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.25 * static_cast<double>(i) - 1.0;
  {
    auto file = hdf5::File::create(name);
    const auto dataset = file.create_dataset("placed", hdf5::Type::float64, {3, 5});
    const auto bytes = dataset.stored_bytes();
    REQUIRE(bytes);
    REQUIRE(bytes->size == values.size() * sizeof(double));
    kpipe::io::UncachedFile(name, kpipe::io::UncachedFile::Access::write)
        .write(bytes->offset, bytes->size, values.data());
    file.close();
  }
  CHECK(hdf5::File::open(name).open_dataset("placed").read<double>() == values);
  std::remove(name.c_str());
}

// File::open walks a file in a child first (hdf5_check.hpp), but not one this
// process wrote and closed: a checkpoint writer lists its own files after
// each write. The fault hook crashes the walk's child, so a walk shows.
TEST_CASE("hdf5: a file this process wrote opens without a walk until it changes", "[io]") {
  const auto name = scratch("written-here.h5");
  {
    auto file = hdf5::File::create(name);
    file.write("values", std::vector<double>{1.0, 2.0});
    file.close();
  }
  ::setenv("KPIPE_FAULT", "0:hdf5-crash", 1);
  CHECK(hdf5::File::open(name).open_dataset("values").read<double>() == std::vector<double>{1.0, 2.0});
  // Changed since (here only its modification time): walked again.
  const timespec long_ago[2] = {{1, 0}, {1, 0}};
  CHECK(::utimensat(AT_FDCWD, name.c_str(), long_ago, 0) == 0);  // CHECK: the fault hook is unset below either way
  CHECK_THROWS_WITH(hdf5::File::open(name), Catch::Contains("the HDF5 library crashed reading it"));
  ::unsetenv("KPIPE_FAULT");
  std::remove(name.c_str());
}
