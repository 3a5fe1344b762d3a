/*
 * npy.h -- NumPy .npy files (format 1.0-3.0), little-endian C order, for
 * `neuronsim run`.  Readers are bounded: the header is at most 64 KiB and
 * the data must be exactly shape x itemsize bytes.
 */
#ifndef NSIM_SIM_NPY_H
#define NSIM_SIM_NPY_H

#include <stdint.h>
#include <stdio.h>

#define NPY_MAX_RANK 8

typedef struct npy_array {
	char     descr[8];          /* "<f4", "|u1", ... */
	int      isa_dtype;         /* matching isa dtype, or 0 */
	unsigned itemsize;
	unsigned rank;
	uint64_t shape[NPY_MAX_RANK];
	uint64_t count;             /* elements */
	void    *data;              /* count * itemsize bytes */
} npy_array;

/* 0 on success; else -1 with a message in err */
int  npy_read(const char *path, npy_array *a, char *err, size_t errlen);
int  npy_write(const char *path, const char *descr, unsigned rank, const uint64_t *shape,
	       const void *data, uint64_t bytes, char *err, size_t errlen);
void npy_free(npy_array *a);

/* numpy descr for an isa dtype that numpy has ("<f4"), or NULL (bf16, fp8, tf32) */
const char *npy_descr_of(int isa_dtype);

#endif
