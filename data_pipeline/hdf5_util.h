// Small helpers over the HDF5 C API for the shard writer and readers: RAII identifiers, the
// one process-wide HDF5 lock, typed dataset reads that check class and rank, attributes.
//
// Debian's HDF5 is not built thread-safe: every HDF5 call of the process must hold
// hdf5_mutex() (take an Hdf5Lock). The readers hold it only while loading a shard into
// memory; samples are then served without HDF5.
// Errors: tupe::Error "<file>: <place>: <cause>", HDF5's own message appended where it has one.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace tupe::data_pipeline::h5 {

/// The lock that serialises all HDF5 calls of the process (HDF5 itself is process-global
/// state, so this lock is too: a function-local static, not a mutable data global).
std::mutex& hdf5_mutex();

/// Holds hdf5_mutex() for a scope and turns off HDF5's printing of its error stack (our
/// errors carry the message instead).
class Lock {
 public:
  Lock();

 private:
  std::lock_guard<std::mutex> guard_;
};

/// The innermost and outermost messages of HDF5's current error stack (then cleared), e.g.
/// "unable to open file (file signature not found)"; "" when the stack is empty.
std::string error_text();

/// An HDF5 identifier closed by its matching H5?close on destruction. Move-only.
class Id {
 public:
  Id() = default;
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Id(Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Id& operator=(Id&& o) noexcept;
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() { reset(); }
  /// Closes now; returns false when the close failed (e.g. a write-back error).
  bool reset();
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

/// Opens `path` read-only; throws "<path>: cannot open as HDF5 (...)" (missing, not HDF5,
/// truncated), or, when another process holds an exclusive lock on the file (an HDF5 writer
/// such as h5py still has it open for writing, `flock -x`), "<path>: locked by another
/// process ...: wait until it closes the file, or set HDF5_USE_FILE_LOCKING=FALSE ...".
Id open_file_readonly(const std::string& path);

/// Whether dataset `name` exists at the file's root.
bool has_dataset(hid_t file, const std::string& name);

/// Text of a datatype for messages: "int8", "uint16", "float32", "string", ...
std::string describe_type(hid_t type);

/// HDF5 memory type of T (int8, uint8, uint16, uint32, int32, int64).
template <class T>
hid_t native_type() {
  if constexpr (std::is_same_v<T, int8_t>) return H5T_NATIVE_INT8;
  else if constexpr (std::is_same_v<T, uint8_t>) return H5T_NATIVE_UINT8;
  else if constexpr (std::is_same_v<T, uint16_t>) return H5T_NATIVE_UINT16;
  else if constexpr (std::is_same_v<T, uint32_t>) return H5T_NATIVE_UINT32;
  else if constexpr (std::is_same_v<T, int32_t>) return H5T_NATIVE_INT32;
  else if constexpr (std::is_same_v<T, int64_t>) return H5T_NATIVE_INT64;
  else static_assert(sizeof(T) == 0, "unsupported element type");
}

/// Shape of dataset `name`; throws "<path>: missing dataset 'name'".
std::vector<hsize_t> dataset_dims(const std::string& path, hid_t file, const std::string& name);

/// Largest dataset a reader accepts (bytes in memory): 1 TiB, far above any one shard.
inline constexpr hsize_t kMaxDatasetBytes = hsize_t{1} << 40;

/// Number of elements of a dataset of shape `dims`, checked for overflow: throws
/// "<path>: dataset 'name' declares shape [...], more than 1 TiB: ..." when dims' product
/// times element_bytes exceeds kMaxDatasetBytes (never wraps around).
hsize_t checked_numel(const std::string& path, const std::string& name, const std::vector<hsize_t>& dims,
                      size_t element_bytes);

/// Checks, before any allocation or read, that `dataset` can be read as declared: every
/// filter of its pipeline is available (else "<path>: dataset 'name' is compressed with HDF5
/// filter 32000 (lzf), which this HDF5 library lacks ..."), the storage it claims lies
/// inside the file ("... truncated"), and `declared_bytes` (elements x stored element size)
/// is within what that storage can hold (1x unfiltered, 1100x deflate/LZF) ("... declares
/// N bytes of data but the file stores M bytes of it ...").
void check_readable(const std::string& path, hid_t dataset, const std::string& name, hsize_t declared_bytes);

/// Reads the whole integer dataset `name` (of `rank` dimensions) into `out`, converting the
/// stored integer type (any width, signed or not) to T; returns its shape. Throws
/// "<path>: missing dataset 'name'", "<path>: dataset 'name' has dtype float32, expected an
/// integer type", "<path>: dataset 'name' has 3 dimensions, expected 2", the errors of
/// checked_numel and check_readable, or a read failure (truncated data) with HDF5's message.
template <class T>
std::vector<hsize_t> read_integer_dataset(const std::string& path, hid_t file, const std::string& name, int rank,
                                          std::vector<T>& out);

/// Reads rows [row_begin, row_begin + rows) of integer dataset `dataset` (named `name` in
/// messages; dimension 0 counts rows, the others are read whole) into `out`, converting to
/// T. The caller checked the dtype and shape at open. Throws "<path>: dataset 'name': read
/// of rows [a, b) failed (truncated or damaged file): ...".
template <class T>
void read_integer_rows(const std::string& path, hid_t dataset, const std::string& name, hsize_t row_begin, hsize_t rows,
                       std::vector<T>& out);

/// Where a 1-D dataset's elements lie in the file, for reads by file offset (pread).
struct FileLayout {
  bool filtered = false;          ///< compressed (or any filter): not readable by offset
  hsize_t chunk_elements = 0;     ///< elements per chunk; 0 = contiguous (one run)
  std::vector<int64_t> addresses; ///< file byte offset of each chunk in order (contiguous: one)
  size_t element_bytes = 0;       ///< stored element size (bytes)
  bool little_endian = true;      ///< stored byte order
};

/// The storage of 1-D dataset `dataset` of `numel` elements. For unfiltered datasets, every
/// chunk's file address (H5Dget_chunk_info_by_coord) or the contiguous offset (H5Dget_offset),
/// each checked to lie inside the file. Throws "<path>: dataset 'name': chunk k is not
/// allocated / lies beyond the end of the file (truncated)".
FileLayout file_layout(const std::string& path, hid_t dataset, const std::string& name, hsize_t numel);

bool has_attribute(hid_t obj, const std::string& name);
/// Attribute readers; throw "<path>: missing attribute 'name'" or "... has type X, expected Y".
int64_t read_int_attribute(const std::string& path, hid_t obj, const std::string& name);
double read_double_attribute(const std::string& path, hid_t obj, const std::string& name);
std::string read_string_attribute(const std::string& path, hid_t obj, const std::string& name);

/// Attribute writers (scalar int64, float64, variable-length UTF-8 string); throw
/// "<path>: cannot write attribute 'name'".
void write_int_attribute(const std::string& path, hid_t obj, const std::string& name, int64_t value);
void write_double_attribute(const std::string& path, hid_t obj, const std::string& name, double value);
void write_string_attribute(const std::string& path, hid_t obj, const std::string& name, const std::string& value);

}  // namespace tupe::data_pipeline::h5
