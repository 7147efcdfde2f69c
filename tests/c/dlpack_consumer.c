/* A DLPack consumer written in C, built by the test suite and loaded with
 * dlopen: it checks a DLManagedTensorVersioned from warmarena, sums its f32
 * elements, and calls the deleter, as any C library taking DLPack would. */
#include <stdint.h>
#include <stddef.h>

typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* Returns the element sum, or a negative code when the tensor is not a CPU,
 * compact, version-1 f32 tensor. Always calls the deleter. */
double consume_f32(DLManagedTensorVersioned *t, const void **data_seen) {
  double sum = 0.0;
  if (t->version.major != 1) sum = -1.0;
  else if (t->dl_tensor.device.device_type != 1) sum = -2.0;
  else if (t->dl_tensor.dtype.code != 2 || t->dl_tensor.dtype.bits != 32 || t->dl_tensor.dtype.lanes != 1) sum = -3.0;
  else if (t->dl_tensor.strides != NULL) sum = -4.0;
  else {
    int64_t n = 1;
    for (int32_t i = 0; i < t->dl_tensor.ndim; i++) n *= t->dl_tensor.shape[i];
    const float *p = (const float *)((const char *)t->dl_tensor.data + t->dl_tensor.byte_offset);
    for (int64_t i = 0; i < n; i++) sum += p[i];
  }
  *data_seen = t->dl_tensor.data;
  if (t->deleter) t->deleter(t);
  return sum;
}
