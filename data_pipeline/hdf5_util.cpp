#include "data_pipeline/hdf5_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "common/error.h"

namespace tupe::data_pipeline::h5 {

std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

Lock::Lock() : guard_(hdf5_mutex()) {
  // Before HDF5's first call: no library shutdown at exit. Every identifier tupe opens is
  // closed by its owner; what HDF5 would still flush at exit is a file whose close already
  // failed (a full disk), and flushing it there crashed (SIGSEGV) after the error was
  // printed. Later calls are no-ops.
  static const bool no_atexit = (H5dont_atexit(), true);
  (void)no_atexit;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

namespace {

struct ErrorWalk {
  std::string innermost, outermost;
};

herr_t walk_error(unsigned n, const H5E_error2_t* err, void* data) {
  auto* w = static_cast<ErrorWalk*>(data);
  const std::string desc = err->desc ? err->desc : "";
  if (n == 0) w->innermost = desc;
  w->outermost = desc;
  return 0;
}

}  // namespace

std::string error_text() {
  ErrorWalk w;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_error, &w);
  H5Eclear2(H5E_DEFAULT);
  // Our errors are one line: HDF5's descriptions may hold line breaks.
  for (std::string* t : {&w.innermost, &w.outermost})
    for (char& c : *t)
      if (c == '\n' || c == '\r') c = ' ';
  if (w.innermost.empty()) return w.outermost;
  if (w.outermost.empty() || w.outermost == w.innermost) return w.innermost;
  return w.outermost + " (" + w.innermost + ")";
}

Id& Id::operator=(Id&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

bool Id::reset() {
  bool ok = true;
  if (id_ >= 0 && close_) ok = close_(id_) >= 0;
  id_ = H5I_INVALID_HID;
  return ok;
}

namespace {

/// Whether another process holds an exclusive flock() on `path` (the lock HDF5 takes: a
/// reader asks for a shared one, which an exclusive lock refuses).
bool locked_by_another_process(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool locked = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // also drops the shared lock if it was granted
  return locked;
}

}  // namespace

Id open_file_readonly(const std::string& path) {
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  TUPE_CHECK(is_hdf5 > 0, path << ": cannot open as HDF5 (missing, not an HDF5 file, or truncated): "
                               << (is_hdf5 == 0 ? "no HDF5 signature" : error_text()));
  Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (f.valid()) return f;
  const std::string why = error_text();
  TUPE_CHECK(!locked_by_another_process(path),
             path << ": locked by another process (an HDF5 writer such as h5py still has it open for writing, or a "
                     "`flock -x` holds it): wait until that process closes the file; if no process does (a stale lock "
                     "of a network file system), set HDF5_USE_FILE_LOCKING=FALSE");
  TUPE_FAIL(path << ": cannot open as HDF5 (truncated or damaged): " << why);
}

bool has_dataset(hid_t file, const std::string& name) {
  const htri_t link = H5Lexists(file, name.c_str(), H5P_DEFAULT);
  if (link <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  Id obj(H5Oopen(file, name.c_str(), H5P_DEFAULT), H5Oclose);
  if (!obj.valid()) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  return H5Iget_type(obj.get()) == H5I_DATASET;
}

std::string describe_type(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t bits = H5Tget_size(type) * 8;
  switch (cls) {
    case H5T_INTEGER: return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(bits);
    case H5T_FLOAT: return "float" + std::to_string(bits);
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "vlen";
    default: return "non-numeric type";
  }
}

std::vector<hsize_t> dataset_dims(const std::string& path, hid_t file, const std::string& name) {
  TUPE_CHECK(has_dataset(file, name), path << ": missing dataset '" << name << "'");
  Id ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  TUPE_CHECK(ds.valid(), path << ": dataset '" << name << "': cannot open: " << error_text());
  Id space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  TUPE_CHECK(rank >= 0, path << ": dataset '" << name << "': cannot read shape: " << error_text());
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

namespace {

std::string shape_text(const std::vector<hsize_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

hsize_t checked_numel(const std::string& path, const std::string& name, const std::vector<hsize_t>& dims,
                      size_t element_bytes) {
  // Products are checked before they are formed: a crafted shape such as [4, 2^62] must not
  // wrap around to a small count.
  const hsize_t limit = kMaxDatasetBytes / std::max<size_t>(element_bytes, 1);
  hsize_t numel = 1;
  for (const hsize_t d : dims) {
    TUPE_CHECK(d == 0 || numel <= limit / d, path << ": dataset '" << name << "' declares shape " << shape_text(dims)
                                                  << ", more than " << (kMaxDatasetBytes >> 40)
                                                  << " TiB: damaged or not a shard");
    numel *= d;
  }
  return numel;
}

void check_readable(const std::string& path, hid_t dataset, const std::string& name, hsize_t declared_bytes) {
  Id dcpl(H5Dget_create_plist(dataset), H5Pclose);
  TUPE_CHECK(dcpl.valid(), path << ": dataset '" << name << "': cannot read its storage properties: " << error_text());
  const int nfilters = H5Pget_nfilters(dcpl.get());
  bool known_ratio = true;  // only filters whose best compression ratio is known (deflate's)
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, config = 0;
    size_t ncd = 0;
    char fname[128] = {0};
    const H5Z_filter_t id =
        H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &ncd, nullptr, sizeof fname, fname, &config);
    TUPE_CHECK(id >= 0, path << ": dataset '" << name << "': cannot read filter " << i << ": " << error_text());
    const htri_t avail = H5Zfilter_avail(id);
    H5Eclear2(H5E_DEFAULT);
    TUPE_CHECK(avail > 0, path << ": dataset '" << name << "' is compressed with HDF5 filter " << id
                               << (fname[0] ? std::string(" (") + fname + ")" : std::string())
                               << ", which this HDF5 library lacks (no plugin on HDF5_PLUGIN_PATH); rewrite it with "
                                  "gzip, e.g. `h5repack -f GZIP=4 IN OUT`");
    known_ratio = known_ratio && (id == H5Z_FILTER_DEFLATE || id == H5Z_FILTER_SHUFFLE ||
                                  id == H5Z_FILTER_FLETCHER32 || id == 32000 /* LZF */);
  }
  if (declared_bytes == 0) return;
  // What the file really holds for this dataset. Unfiltered data is stored at full size;
  // deflate (and LZF) cannot compress better than about 1032:1. A declared size beyond that
  // is a damaged or crafted header, refused before allocating memory for it.
  const hsize_t stored = H5Dget_storage_size(dataset);
  std::error_code ec;
  const auto file_bytes = static_cast<hsize_t>(std::filesystem::file_size(path, ec));
  TUPE_CHECK(ec || stored <= file_bytes, path << ": dataset '" << name << "' stores " << stored
                                              << " bytes but the file has only " << file_bytes << ": truncated");
  const hsize_t max_ratio = nfilters == 0 ? 1 : known_ratio ? 1100 : 65536;
  const hsize_t slack = nfilters == 0 ? 0 : 65536;  // headers of tiny compressed chunks
  TUPE_CHECK(declared_bytes <= stored * max_ratio + slack,
             path << ": dataset '" << name << "' declares " << declared_bytes << " bytes of data but the file stores "
                  << stored << " bytes of it (file size " << file_bytes << "): damaged or truncated");
}

template <class T>
std::vector<hsize_t> read_integer_dataset(const std::string& path, hid_t file, const std::string& name, int rank,
                                          std::vector<T>& out) {
  TUPE_CHECK(has_dataset(file, name), path << ": missing dataset '" << name << "'");
  Id ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  TUPE_CHECK(ds.valid(), path << ": dataset '" << name << "': cannot open: " << error_text());
  Id type(H5Dget_type(ds.get()), H5Tclose);
  TUPE_CHECK(H5Tget_class(type.get()) == H5T_INTEGER,
             path << ": dataset '" << name << "' has dtype " << describe_type(type.get()) << ", expected an integer type");
  Id space(H5Dget_space(ds.get()), H5Sclose);
  const int got_rank = H5Sget_simple_extent_ndims(space.get());
  TUPE_CHECK(got_rank == rank,
             path << ": dataset '" << name << "' has " << got_rank << " dimensions, expected " << rank);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  const hsize_t numel = checked_numel(path, name, dims, H5Tget_size(type.get()));
  check_readable(path, ds.get(), name, numel * H5Tget_size(type.get()));
  out.resize(static_cast<size_t>(numel));
  if (numel > 0) {
    const herr_t st = H5Dread(ds.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
    TUPE_CHECK(st >= 0, path << ": dataset '" << name << "': read failed (truncated or damaged file): " << error_text());
  }
  return dims;
}

template <class T>
void read_integer_rows(const std::string& path, hid_t dataset, const std::string& name, hsize_t row_begin, hsize_t rows,
                       std::vector<T>& out) {
  Id space(H5Dget_space(dataset), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  TUPE_CHECK(rank >= 1 && rank <= 2, path << ": dataset '" << name << "': unexpected rank " << rank);
  hsize_t dims[2] = {0, 1};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  TUPE_CHECK(row_begin + rows <= dims[0], path << ": dataset '" << name << "': rows [" << row_begin << ", "
                                               << row_begin + rows << ") outside its " << dims[0] << " rows");
  out.resize(static_cast<size_t>(rows * (rank == 2 ? dims[1] : 1)));
  if (out.empty()) return;
  const hsize_t start[2] = {row_begin, 0};
  const hsize_t count[2] = {rows, dims[1]};
  bool ok = H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0;
  Id mspace(H5Screate_simple(rank, count, nullptr), H5Sclose);
  ok = ok && H5Dread(dataset, native_type<T>(), mspace.get(), space.get(), H5P_DEFAULT, out.data()) >= 0;
  TUPE_CHECK(ok, path << ": dataset '" << name << "': read of rows [" << row_begin << ", " << row_begin + rows
                      << ") failed (truncated or damaged file): " << error_text());
}

template void read_integer_rows<int8_t>(const std::string&, hid_t, const std::string&, hsize_t, hsize_t,
                                        std::vector<int8_t>&);
template void read_integer_rows<uint16_t>(const std::string&, hid_t, const std::string&, hsize_t, hsize_t,
                                          std::vector<uint16_t>&);
template void read_integer_rows<uint32_t>(const std::string&, hid_t, const std::string&, hsize_t, hsize_t,
                                          std::vector<uint32_t>&);
template void read_integer_rows<int32_t>(const std::string&, hid_t, const std::string&, hsize_t, hsize_t,
                                         std::vector<int32_t>&);

FileLayout file_layout(const std::string& path, hid_t dataset, const std::string& name, hsize_t numel) {
  FileLayout out;
  Id dcpl(H5Dget_create_plist(dataset), H5Pclose);
  Id type(H5Dget_type(dataset), H5Tclose);
  TUPE_CHECK(dcpl.valid() && type.valid(), path << ": dataset '" << name << "': cannot read its storage: " << error_text());
  out.filtered = H5Pget_nfilters(dcpl.get()) > 0;
  out.element_bytes = H5Tget_size(type.get());
  out.little_endian = H5Tget_order(type.get()) != H5T_ORDER_BE;
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_CHUNKED) {
    hsize_t chunk = 0;
    TUPE_CHECK(H5Pget_chunk(dcpl.get(), 1, &chunk) == 1 && chunk > 0,
               path << ": dataset '" << name << "': cannot read its chunk shape: " << error_text());
    out.chunk_elements = chunk;
  }
  if (out.filtered || numel == 0) return out;
  std::error_code ec;
  const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  auto check_inside = [&](haddr_t addr, hsize_t bytes, hsize_t k) {
    TUPE_CHECK(addr != HADDR_UNDEF, path << ": dataset '" << name << "': chunk " << k << " is not allocated: " << error_text());
    TUPE_CHECK(ec || static_cast<int64_t>(addr + bytes) <= file_bytes,
               path << ": dataset '" << name << "': chunk " << k << " lies beyond the end of the file (" << file_bytes
                    << " bytes): truncated");
    out.addresses.push_back(static_cast<int64_t>(addr));
  };
  if (layout == H5D_CONTIGUOUS) {
    check_inside(H5Dget_offset(dataset), numel * out.element_bytes, 0);
    return out;
  }
  TUPE_CHECK(layout == H5D_CHUNKED, path << ": dataset '" << name << "': unsupported storage layout " << int(layout));
  const hsize_t chunk = out.chunk_elements;
  const hsize_t chunks = (numel + chunk - 1) / chunk;
  out.addresses.reserve(static_cast<size_t>(chunks));
  for (hsize_t k = 0; k < chunks; ++k) {
    const hsize_t coord[1] = {k * chunk};
    unsigned filter_mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t bytes = 0;
    TUPE_CHECK(H5Dget_chunk_info_by_coord(dataset, coord, &filter_mask, &addr, &bytes) >= 0,
               path << ": dataset '" << name << "': cannot locate chunk " << k << ": " << error_text());
    check_inside(addr, bytes, k);
  }
  return out;
}

template std::vector<hsize_t> read_integer_dataset<int8_t>(const std::string&, hid_t, const std::string&, int,
                                                           std::vector<int8_t>&);
template std::vector<hsize_t> read_integer_dataset<uint32_t>(const std::string&, hid_t, const std::string&, int,
                                                             std::vector<uint32_t>&);
template std::vector<hsize_t> read_integer_dataset<int32_t>(const std::string&, hid_t, const std::string&, int,
                                                            std::vector<int32_t>&);
template std::vector<hsize_t> read_integer_dataset<int64_t>(const std::string&, hid_t, const std::string&, int,
                                                            std::vector<int64_t>&);

bool has_attribute(hid_t obj, const std::string& name) {
  const htri_t e = H5Aexists(obj, name.c_str());
  if (e < 0) H5Eclear2(H5E_DEFAULT);
  return e > 0;
}

namespace {

Id open_attribute(const std::string& path, hid_t obj, const std::string& name) {
  TUPE_CHECK(has_attribute(obj, name), path << ": missing attribute '" << name << "'");
  Id a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
  TUPE_CHECK(a.valid(), path << ": attribute '" << name << "': cannot open: " << error_text());
  Id space(H5Aget_space(a.get()), H5Sclose);
  TUPE_CHECK(H5Sget_simple_extent_npoints(space.get()) == 1,
             path << ": attribute '" << name << "' is not a scalar");
  return a;
}

}  // namespace

int64_t read_int_attribute(const std::string& path, hid_t obj, const std::string& name) {
  Id a = open_attribute(path, obj, name);
  Id type(H5Aget_type(a.get()), H5Tclose);
  TUPE_CHECK(H5Tget_class(type.get()) == H5T_INTEGER,
             path << ": attribute '" << name << "' has type " << describe_type(type.get()) << ", expected an integer");
  int64_t v = 0;
  TUPE_CHECK(H5Aread(a.get(), H5T_NATIVE_INT64, &v) >= 0,
             path << ": attribute '" << name << "': read failed: " << error_text());
  return v;
}

double read_double_attribute(const std::string& path, hid_t obj, const std::string& name) {
  Id a = open_attribute(path, obj, name);
  Id type(H5Aget_type(a.get()), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.get());
  TUPE_CHECK(cls == H5T_FLOAT || cls == H5T_INTEGER,
             path << ": attribute '" << name << "' has type " << describe_type(type.get()) << ", expected a number");
  double v = 0;
  TUPE_CHECK(H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) >= 0,
             path << ": attribute '" << name << "': read failed: " << error_text());
  return v;
}

std::string read_string_attribute(const std::string& path, hid_t obj, const std::string& name) {
  Id a = open_attribute(path, obj, name);
  Id type(H5Aget_type(a.get()), H5Tclose);
  TUPE_CHECK(H5Tget_class(type.get()) == H5T_STRING,
             path << ": attribute '" << name << "' has type " << describe_type(type.get()) << ", expected a string");
  if (H5Tis_variable_str(type.get()) > 0) {
    Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* s = nullptr;
    TUPE_CHECK(H5Aread(a.get(), mem.get(), &s) >= 0,
               path << ": attribute '" << name << "': read failed: " << error_text());
    std::string out = s ? s : "";
    H5free_memory(s);
    return out;
  }
  const size_t size = H5Tget_size(type.get());
  std::string out(size, '\0');
  TUPE_CHECK(H5Aread(a.get(), type.get(), out.data()) >= 0,
             path << ": attribute '" << name << "': read failed: " << error_text());
  out.resize(out.find('\0') == std::string::npos ? out.size() : out.find('\0'));
  return out;
}

namespace {

void write_attribute(const std::string& path, hid_t obj, const std::string& name, hid_t file_type, hid_t mem_type,
                     const void* value) {
  if (has_attribute(obj, name)) H5Adelete(obj, name.c_str());
  Id space(H5Screate(H5S_SCALAR), H5Sclose);
  Id a(H5Acreate2(obj, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  TUPE_CHECK(a.valid() && H5Awrite(a.get(), mem_type, value) >= 0,
             path << ": cannot write attribute '" << name << "': " << error_text());
}

}  // namespace

void write_int_attribute(const std::string& path, hid_t obj, const std::string& name, int64_t value) {
  write_attribute(path, obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void write_double_attribute(const std::string& path, hid_t obj, const std::string& name, double value) {
  write_attribute(path, obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

void write_string_attribute(const std::string& path, hid_t obj, const std::string& name, const std::string& value) {
  Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  const char* s = value.c_str();
  write_attribute(path, obj, name, type.get(), type.get(), &s);
}

}  // namespace tupe::data_pipeline::h5
